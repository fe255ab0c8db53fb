"""The training recipe's HyperPyYAML file (``train_profile.yaml``), checked into a :class:`TrainConfig`.

Loaded like the profiling sweep's file (:func:`sbprof.yamlconfig.load_yaml`:
``--key value`` overrides, nested mappings merged key by key); every mistake
stops the run before any model is built, with one
:class:`~sbprof.errors.ConfigError` naming the file, the key and the value.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from sbprof.checks import check_flag, check_int, is_positive_number, nearest, parse_device
from sbprof.errors import ConfigError
from sbprof.train.models import VARIANTS, ModelSizes

DATA_KEYS = ("batch_size", "num_batches", "scale", "sample_rate")
STEP_KEYS = ("warmup", "measured")
PROFILING_KEYS = ("modules", "memory", "flops", "export_trace", "trace_steps")
SCHEMA: Dict[str, Any] = {
    "variants": None, "device": None, "threads": None, "seed": None, "learning_rate": None,
    "model": {k: None for k in ModelSizes.__dataclass_fields__}, "data": {k: None for k in DATA_KEYS},
    "steps": {k: None for k in STEP_KEYS}, "profiling": {k: None for k in PROFILING_KEYS}, "output_folder": None,
}
DEFAULT_OUTPUT_FOLDER = "results/train_profile"


@dataclass(frozen=True)
class DataConfig:
    """The mock-up batches (``data``; see :mod:`sbprof.train.data`)."""

    batch_size: int = 4
    num_batches: int = 4
    scale: float = 0.25
    sample_rate: int = 16000


@dataclass(frozen=True)
class ProfilingConfig:
    """What is measured beside the step times (``profiling``)."""

    modules: Any = "default"
    memory: bool = True
    flops: bool = True
    export_trace: bool = False
    trace_steps: int = 2


@dataclass(frozen=True)
class TrainConfig:
    """A checked training-recipe configuration (``train_profile.yaml`` documents every key)."""

    variants: Tuple[str, ...] = VARIANTS
    device: str = "cpu"
    threads: Optional[int] = None
    seed: int = 1234
    learning_rate: float = 1e-3
    model: ModelSizes = field(default_factory=ModelSizes)
    data: DataConfig = field(default_factory=DataConfig)
    warmup_steps: int = 2
    measured_steps: int = 6
    profiling: ProfilingConfig = field(default_factory=ProfilingConfig)
    output_folder: str = DEFAULT_OUTPUT_FOLDER
    file: str = ""

    def rules(self) -> Dict[str, Any]:
        """What every result of a run depends on (a resumed run must share it)."""
        data = asdict(self)
        for key in ("variants", "device", "threads", "output_folder", "file"):
            data.pop(key)
        return data


def _section(tree: Mapping[str, Any], key: str, file: str) -> Mapping[str, Any]:
    value = tree.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{file}: {key} must be a mapping of keys, got {value!r}")
    return value


def _number(value: Any, name: str, file: str) -> float:
    if not is_positive_number(value):
        raise ConfigError(f"{file}: {name} must be a positive number, got {value!r}")
    return float(value)


def _variants(value: Any, file: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{file}: variants must be a non-empty list from {list(VARIANTS)}, got {value!r}")
    for v in value:
        if v not in VARIANTS:
            raise ConfigError(f"{file}: variants: unknown variant {v!r}{nearest(str(v), VARIANTS)}; "
                              f"known: {', '.join(VARIANTS)}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{file}: variants lists a variant twice: {list(value)!r}")
    return tuple(value)


def _device(value: Any, file: str) -> str:
    import torch

    if value is None:
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    kind, index = parse_device(value, file, "device")
    if kind == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise ConfigError(f"{file}: device: {value!r} asked for, but CUDA is not available on this machine")
    index = index or 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"{file}: device: {value!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return f"cuda:{index}"


def _modules(value: Any, file: str) -> Any:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(i, str) and i for i in items):
        raise ConfigError(f"{file}: profiling.modules must be 'default', a module-name pattern, 'type:ClassName' "
                          f"or a non-empty list of them, got {value!r}")
    return value if isinstance(value, str) else list(value)


def validate(tree: Any, file: str, run_options: Optional[Mapping[str, Any]] = None) -> TrainConfig:
    """Check a loaded YAML tree (see the module docstring)."""
    from sbprof.yamlconfig import check_keys

    run_options = dict(run_options or {})
    if tree is None:
        raise ConfigError(f"{file}: the file is empty")
    check_keys(tree, SCHEMA, file)
    model = _section(tree, "model", file)
    defaults = ModelSizes()
    sizes = ModelSizes(**{k: check_int(model.get(k, getattr(defaults, k)), f"model.{k}", 1, file)
                          for k in ModelSizes.__dataclass_fields__})
    if sizes.d_model % sizes.nhead:
        raise ConfigError(f"{file}: model.d_model ({sizes.d_model}) must be a multiple of model.nhead ({sizes.nhead})")
    if sizes.vocab_size < 2:
        raise ConfigError(f"{file}: model.vocab_size must be at least 2 (a blank and one token), got {sizes.vocab_size}")
    data = _section(tree, "data", file)
    steps = _section(tree, "steps", file)
    prof = _section(tree, "profiling", file)
    threads = tree.get("threads")
    output = tree.get("output_folder") or DEFAULT_OUTPUT_FOLDER
    if not isinstance(output, str):
        raise ConfigError(f"{file}: output_folder must be a path, got {output!r}")
    return TrainConfig(
        variants=_variants(tree.get("variants", list(VARIANTS)), file),
        device=_device(run_options.get("device") or tree.get("device"), file),
        threads=None if threads is None else check_int(threads, "threads", 1, file),
        seed=check_int(tree.get("seed", 1234), "seed", 0, file),
        learning_rate=_number(tree.get("learning_rate", 1e-3), "learning_rate", file),
        model=sizes,
        data=DataConfig(batch_size=check_int(data.get("batch_size", 4), "data.batch_size", 1, file),
                        num_batches=check_int(data.get("num_batches", 4), "data.num_batches", 1, file),
                        scale=_number(data.get("scale", 0.25), "data.scale", file),
                        sample_rate=check_int(data.get("sample_rate", 16000), "data.sample_rate", 1000, file)),
        warmup_steps=check_int(steps.get("warmup", 2), "steps.warmup", 0, file),
        measured_steps=check_int(steps.get("measured", 6), "steps.measured", 1, file),
        profiling=ProfilingConfig(
            modules=_modules(prof.get("modules", "default"), file),
            memory=check_flag(prof.get("memory", True), "profiling.memory", file),
            flops=check_flag(prof.get("flops", True), "profiling.flops", file),
            export_trace=check_flag(prof.get("export_trace", False), "profiling.export_trace", file),
            trace_steps=check_int(prof.get("trace_steps", 2), "profiling.trace_steps", 1, file)),
        output_folder=str(Path(os.path.expanduser(output)).resolve()),
        file=file)


def load_train_config(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None,
                      run_options: Optional[Mapping[str, Any]] = None) -> TrainConfig:
    """Load ``train_profile.yaml`` with command-line overrides and check it.

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.yaml").write_text("variants: [ctc]\\ndata: {batch_size: 2}\\n")
    >>> cfg = load_train_config(d / "t.yaml", {"steps": {"measured": 3}})
    >>> cfg.variants, cfg.data.batch_size, cfg.measured_steps, cfg.warmup_steps
    (('ctc',), 2, 3, 2)
    >>> load_train_config(d / "t.yaml", {"data": {"bach_size": 3}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: command line: unknown key 'data.bach_size' (did you mean 'data.batch_size'?)...
    """
    from sbprof.yamlconfig import check_keys, load_yaml

    if overrides:
        check_keys(overrides, SCHEMA, "command line")
    text = Path(path).read_text() if Path(path).is_file() else None
    if text is not None and all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        raise ConfigError(f"{path}: the file is empty (no keys, at most comments)")
    return validate(load_yaml(path, overrides), str(path), run_options)
