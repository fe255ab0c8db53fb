"""The transducer benchmark's configuration: HyperPyYAML, validated into frozen dataclasses.

Every mistake stops the run before any worker starts, with one
:class:`~sbprof.base.errors.ConfigError` naming the file, the key and the value:
an unknown key (with a "did you mean"), an unknown backend, a non-positive
size, an unknown shape source or batching mode, a missing input file, a
device this machine lacks. Command-line overrides (``--key value``, parsed by
:func:`sbprof.cli.overrides.parse_command_line`) are merged by HyperPyYAML,
nested mappings key by key: ``--device cpu --batching "{batch_size: 4}"``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from sbprof.base.checks import check_choices, check_flag, check_int, is_positive_number
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble, check_preamble, load_tree
from sbprof.transducer.shapes import SOURCES
from sbprof.record.codec import Codec

SHAPE_KEYS = ("source", "path", "sentencepiece_model", "frame_shift_s", "subsampling", "num_utterances", "scale")
SEARCH_KEYS = ("backends", "mode", "budget_bytes", "start", "limit", "step", "probe_batches")
SCHEMA: Dict[str, Any] = {
    **PREAMBLE, "backends": None, "interpreters": None, "backend_options": None,
    "shapes": {k: None for k in SHAPE_KEYS}, "batching": {"batch_size": None, "max_frames": None},
    "vocab_size": None, "joiner_dim": None, "blank": None, "export_trace": None,
    "search": {k: None for k in SEARCH_KEYS},
}
DEFAULTS = Defaults(warmup=20, measured=20, output_folder="results/transducer")
"""The study's torch.profiler schedule: wait 10 + warm-up 10 unmeasured steps, then 20 active (measured) ones."""


@dataclass(frozen=True)
class ShapeConfig(Codec):
    """Where utterance shapes come from (``shapes`` in the YAML) and how they are scaled."""

    source: str = "synthetic"
    path: Optional[str] = None
    sentencepiece_model: Optional[str] = None
    frame_shift_s: float = 0.01
    subsampling: int = 4
    num_utterances: int = 1000
    scale: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class SearchConfig:
    """The largest-batch search (``search`` in the YAML)."""

    backends: Tuple[str, ...]
    mode: str = "batch_size"
    budget_bytes: Optional[int] = None
    start: int = 1
    limit: int = 4096
    step: int = 1
    probe_batches: int = 3


@dataclass(frozen=True)
class TransducerConfig:
    """A validated benchmark configuration (see ``transducer.yaml`` for every key)."""

    preamble: Preamble
    backends: Tuple[str, ...]
    shapes: ShapeConfig
    batch_size: Optional[int] = 8
    max_frames: Optional[int] = None
    interpreters: Dict[str, str] = field(default_factory=dict)
    backend_options: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    vocab_size: int = 500
    joiner_dim: int = 512
    blank: int = 0
    export_trace: bool = False
    search: Optional[SearchConfig] = None

    @property
    def steps(self) -> int:
        """Steps per batching mode: the unmeasured ones, then the measured ones."""
        return self.preamble.warmup + self.preamble.measured


def _count(tree: Mapping[str, Any], key: str, default: Any, file: str, minimum: int = 1, name: str = "") -> Any:
    """``tree[key]`` as an integer >= ``minimum``; ``None`` stays ``None`` where that is the default."""
    value = tree.get(key, default)
    if value is None and default is None:
        return None
    return check_int(value, name or key, minimum, file)


def _path(value: Any, base: Path, file: str, key: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{file}: {key} must be a path, got {value!r}")
    path = Path(os.path.expanduser(value))
    return str(path if path.is_absolute() else (base / path))


def _backend_names(value: Any, file: str, key: str) -> Tuple[str, ...]:
    from sbprof.transducer.backends import all_backends

    return check_choices(value, key, list(all_backends()), file, "backend")


def _shapes(tree: Mapping[str, Any], file: str, base: Path, seed: int) -> ShapeConfig:
    source = tree.get("source", "synthetic")
    if source not in SOURCES:
        raise ConfigError(f"{file}: shapes.source must be one of {', '.join(SOURCES)}, got {source!r}")
    path = _path(tree.get("path"), base, file, "shapes.path")
    if source != "synthetic" and (path is None or not Path(path).is_file()):
        raise ConfigError(f"{file}: shapes.path: source {source!r} needs an existing file, got {path!r}")
    sp_model = _path(tree.get("sentencepiece_model"), base, file, "shapes.sentencepiece_model")
    if source in ("csv", "lhotse") and (sp_model is None or not Path(sp_model).is_file()):
        raise ConfigError(f"{file}: shapes.sentencepiece_model: source {source!r} needs an existing "
                          f"sentencepiece model, got {sp_model!r}")
    for key in ("frame_shift_s", "scale"):
        if key in tree and not is_positive_number(tree[key]):
            raise ConfigError(f"{file}: shapes.{key} must be a positive number, got {tree[key]!r}")
    return ShapeConfig(source=source, path=path, sentencepiece_model=sp_model,
                       frame_shift_s=tree.get("frame_shift_s", 0.01),
                       subsampling=_count(tree, "subsampling", 4, file, name="shapes.subsampling"),
                       num_utterances=_count(tree, "num_utterances", 1000, file, name="shapes.num_utterances"),
                       scale=tree.get("scale", 1.0), seed=seed)


def _search(tree: Optional[Mapping[str, Any]], file: str, backends: Sequence[str]) -> Optional[SearchConfig]:
    if tree is None:
        return None
    names = _backend_names(tree.get("backends", list(backends)), file, "search.backends")
    mode = tree.get("mode", "batch_size")
    if mode not in ("batch_size", "max_frames"):
        raise ConfigError(f"{file}: search.mode must be batch_size or max_frames, got {mode!r}")
    limit = _count(tree, "limit", 4096 if mode == "batch_size" else 10**6, file, name="search.limit")
    return SearchConfig(backends=names, mode=mode,
                        budget_bytes=_count(tree, "budget_bytes", None, file, name="search.budget_bytes"),
                        start=_count(tree, "start", 1, file, name="search.start"), limit=limit,
                        step=_count(tree, "step", 1, file, name="search.step"),
                        probe_batches=_count(tree, "probe_batches", 3, file, name="search.probe_batches"))


def _options(value: Any, file: str) -> Dict[str, Dict[str, Any]]:
    """``backend_options``: backend name -> options its adapter accepts (checked by the adapter)."""
    options = value or {}
    if not isinstance(options, Mapping) or not all(isinstance(v, Mapping) for v in options.values()):
        raise ConfigError(f"{file}: backend_options must map backend names to option mappings, got {options!r}")
    if options:
        _backend_names(list(options), file, "backend_options")
        from sbprof.transducer.backends import get_backend

        for name, opts in options.items():
            try:
                get_backend(name).configured(dict(opts))
            except ValueError as exc:
                raise ConfigError(f"{file}: backend_options.{name}: {exc}") from None
    return {k: dict(v) for k, v in options.items()}


def validate(tree: Any, file: str, base: Path, run_options: Optional[Mapping[str, Any]] = None) -> TransducerConfig:
    """The :class:`TransducerConfig` of a loaded YAML ``tree`` (overrides merged) from ``file``.

    Relative paths (shape files, interpreters) resolve against ``base``;
    ``run_options`` are the command line's (``device``, ``retry_failed``...).
    """
    backends = _backend_names(tree.get("backends"), file, "backends")
    interpreters = tree.get("interpreters") or {}
    if not isinstance(interpreters, Mapping):
        raise ConfigError(f"{file}: interpreters must map backend names to python executables, got {interpreters!r}")
    if interpreters:
        _backend_names(list(interpreters), file, "interpreters")
    batching = tree.get("batching") or {}
    batch_size = _count(batching, "batch_size", None, file, name="batching.batch_size")
    max_frames = _count(batching, "max_frames", None, file, name="batching.max_frames")
    if batch_size is None and max_frames is None:
        raise ConfigError(f"{file}: batching needs batch_size, max_frames or both")
    vocab = _count(tree, "vocab_size", 500, file, 2)
    blank = _count(tree, "blank", 0, file, 0)
    if blank >= vocab:
        raise ConfigError(f"{file}: blank {blank} must be below vocab_size {vocab}")
    preamble = check_preamble(tree, file, run_options, DEFAULTS)
    return TransducerConfig(
        preamble=preamble, backends=backends, shapes=_shapes(tree.get("shapes") or {}, file, base, preamble.seed),
        batch_size=batch_size, max_frames=max_frames,
        interpreters={k: _path(v, base, file, f"interpreters.{k}") for k, v in interpreters.items() if v},
        backend_options=_options(tree.get("backend_options"), file), vocab_size=vocab,
        joiner_dim=_count(tree, "joiner_dim", 512, file), blank=blank,
        export_trace=check_flag(tree.get("export_trace", False), "export_trace", file),
        search=_search(tree.get("search"), file, backends),
    )


def load_config(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None) -> TransducerConfig:
    """The benchmark's YAML file with the command line's overrides and run options, checked."""
    return validate(load_tree(path, overrides, SCHEMA), str(path), Path(path).resolve().parent, run_options)
