"""sbprof's own small SpeechBrain models, built and loaded offline.

The names below load on first use (:mod:`sbprof.models.build` imports SpeechBrain, seconds of imports and its
quirks: torch flags): importing a light submodule, such as :mod:`sbprof.models.batches` under ``sbprof run``,
never imports SpeechBrain into a script that does not use it.
"""
from typing import Any

__all__ = [
    "LOCAL_MODELS",
    "build_local_model",
    "default_root",
    "hparams_path",
    "load_local_model",
    "model_dir",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sbprof.models import build

        return getattr(build, name)
    raise AttributeError(f"module 'sbprof.models' has no attribute {name!r}")
