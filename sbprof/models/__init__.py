"""sbprof's own small SpeechBrain models, built and loaded offline."""

from sbprof.models.build import (
    LOCAL_MODELS,
    build_local_model,
    default_root,
    hparams_path,
    load_local_model,
    model_dir,
)

__all__ = [
    "LOCAL_MODELS",
    "build_local_model",
    "default_root",
    "hparams_path",
    "load_local_model",
    "model_dir",
]
