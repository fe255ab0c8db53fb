"""The training recipe's HyperPyYAML file (``train_profile.yaml``), checked into a :class:`TrainConfig`.

Loaded like the profiling sweep's file (:func:`sbprof.base.yamlconfig.load_yaml`:
``--key value`` overrides, nested mappings merged key by key); every mistake
stops the run before any model is built, with one
:class:`~sbprof.base.errors.ConfigError` naming the file, the key and the value.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from sbprof.base.checks import check_choices, check_flag, check_int, check_list, is_positive_number, nearest
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble, check_preamble, load_tree
from sbprof.train.models import VARIANTS, ModelSizes
from sbprof.record.codec import Codec

DATA_KEYS = ("batch_size", "num_batches", "scale", "sample_rate")
PROFILING_KEYS = ("modules", "memory", "flops", "export_trace", "trace_steps")
SCALINGS = ("strong", "weak")
PRECISIONS = ("fp32", "bf16", "fp16")
"""SpeechBrain's training precisions (its ``--precision``): bf16 and fp16 train under autocast, fp16 with a gradient
scaler, on CUDA only."""
SCHEMA: Dict[str, Any] = {
    **PREAMBLE, "variants": None, "learning_rate": None, "precision": None, "world_sizes": None, "scaling": None,
    "model": {k: None for k in ModelSizes.__dataclass_fields__}, "data": {k: None for k in DATA_KEYS},
    "profiling": {k: None for k in PROFILING_KEYS},
}
DEFAULTS = Defaults(warmup=2, measured=6, output_folder="results/train_profile")


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
class TrainConfig(Codec):
    """A checked training-recipe configuration (``train_profile.yaml`` documents every key).

    ``preamble.warmup`` training steps are left out of every figure, ``preamble.measured`` steps are timed.
    With ``world_sizes``, each world size is a torchrun launch of DDP ranks on this machine, for each
    ``scaling``: ``strong`` splits the global batch ``data.batch_size`` over the ranks, ``weak`` gives every
    rank ``data.batch_size`` utterances.
    """

    preamble: Preamble
    variants: Tuple[str, ...] = VARIANTS
    learning_rate: float = 1e-3
    precision: str = "fp32"
    model: ModelSizes = field(default_factory=ModelSizes)
    data: DataConfig = field(default_factory=DataConfig)
    profiling: ProfilingConfig = field(default_factory=ProfilingConfig)
    world_sizes: Optional[Tuple[int, ...]] = None
    scaling: Tuple[str, ...] = SCALINGS

    def rules(self) -> Dict[str, Any]:
        """What every result of a run depends on (a resumed run must share it)."""
        rules = {"seed": self.preamble.seed, "learning_rate": self.learning_rate, "model": asdict(self.model),
                 "data": asdict(self.data), "warmup": self.preamble.warmup, "measured": self.preamble.measured,
                 "profiling": asdict(self.profiling)}
        if self.precision != "fp32":  # results of runs made before the key existed are fp32 ones and resume as such
            rules["precision"] = self.precision
        if self.world_sizes:
            rules["distributed"] = {"world_sizes": list(self.world_sizes), "scaling": list(self.scaling)}
        return rules

    def tree(self, device: str, threads: int) -> Dict[str, Any]:
        """This configuration on one setting as a YAML tree (JSON is YAML): what a world's ranks are started with.

        Example
        -------
        >>> from sbprof.jobs.preamble import Defaults, check_preamble
        >>> pre = check_preamble({"devices": "cpu", "cpu_threads": 1}, "t.yaml", {}, DEFAULTS)
        >>> validate(TrainConfig(pre).tree("cpu", 1), "again.yaml").preamble.settings == pre.settings
        True
        """
        pre = self.preamble
        return {"variants": list(self.variants), "learning_rate": self.learning_rate, "precision": self.precision,
                "model": asdict(self.model),
                "data": asdict(self.data), "profiling": asdict(self.profiling), "scaling": list(self.scaling),
                "devices": device, "cpu_threads": threads, "cuda_threads": pre.cuda_threads, "seed": pre.seed,
                "warmup": pre.warmup, "measured": pre.measured, "timeout_s": pre.timeout_s,
                "output_folder": pre.output_folder}

    def rank_batch(self, scaling: str, world_size: int) -> int:
        """Utterances per rank and step: the global batch split (``strong``), or the whole batch (``weak``)."""
        return self.data.batch_size // world_size if scaling == "strong" else self.data.batch_size


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


def _modules(value: Any, file: str) -> Any:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(i, str) and i for i in items):
        raise ConfigError(f"{file}: profiling.modules must be 'default', a module-name pattern, 'type:ClassName' "
                          f"or a non-empty list of them, got {value!r}")
    return value if isinstance(value, str) else list(value)


def validate(tree: Any, file: str, run_options: Optional[Mapping[str, Any]] = None) -> TrainConfig:
    """Check a loaded YAML tree (see the module docstring)."""
    model = _section(tree, "model", file)
    defaults = ModelSizes()
    sizes = ModelSizes(**{k: check_int(model.get(k, getattr(defaults, k)), f"model.{k}", 1, file)
                          for k in ModelSizes.__dataclass_fields__})
    if sizes.d_model % sizes.nhead:
        raise ConfigError(f"{file}: model.d_model ({sizes.d_model}) must be a multiple of model.nhead ({sizes.nhead})")
    if sizes.vocab_size < 2:
        raise ConfigError(f"{file}: model.vocab_size must be at least 2 (a blank and one token), got {sizes.vocab_size}")
    if sizes.kernel_size % 2 == 0:
        raise ConfigError(f"{file}: model.kernel_size must be odd (the Conformer's convolution keeps the sequence "
                          f"length only with an odd kernel), got {sizes.kernel_size}")
    data = _section(tree, "data", file)
    prof = _section(tree, "profiling", file)
    pre = check_preamble(tree, file, run_options, DEFAULTS)
    precision = tree.get("precision", "fp32") or "fp32"
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ConfigError(f"{file}: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
                          f"{nearest(str(precision), list(PRECISIONS))}")
    if precision == "fp16" and any(s.device == "cpu" for s in pre.settings):
        raise ConfigError(f"{file}: precision fp16 trains under CUDA autocast with a gradient scaler, on a GPU only "
                          "(SpeechBrain refuses it on the CPU): give devices: cuda, or precision: bf16 on the CPU")
    cfg = TrainConfig(
        preamble=pre, precision=precision,
        variants=check_choices(tree.get("variants", list(VARIANTS)), "variants", VARIANTS, file, "variant"),
        learning_rate=_number(tree.get("learning_rate", 1e-3), "learning_rate", file),
        model=sizes,
        data=DataConfig(batch_size=check_int(data.get("batch_size", 4), "data.batch_size", 1, file),
                        num_batches=check_int(data.get("num_batches", 4), "data.num_batches", 1, file),
                        scale=_number(data.get("scale", 0.25), "data.scale", file),
                        sample_rate=check_int(data.get("sample_rate", 16000), "data.sample_rate", 1000, file)),
        profiling=ProfilingConfig(
            modules=_modules(prof.get("modules", "default"), file),
            memory=check_flag(prof.get("memory", True), "profiling.memory", file),
            flops=check_flag(prof.get("flops", True), "profiling.flops", file),
            export_trace=check_flag(prof.get("export_trace", False), "profiling.export_trace", file),
            trace_steps=check_int(prof.get("trace_steps", 2), "profiling.trace_steps", 1, file)),
        scaling=check_choices(tree.get("scaling", list(SCALINGS)), "scaling", SCALINGS, file, "scaling"))
    return check_distributed(cfg, tree.get("world_sizes"), file)


def check_distributed(cfg: TrainConfig, world_sizes: Any, file: str) -> TrainConfig:
    """``world_sizes`` (and, under torchrun, the world torchrun gives) checked against the backend and the batch.

    Each world size needs its backend here (gloo on the CPU; NCCL with one GPU per rank), and under strong
    scaling a global batch that splits evenly. More busy threads than cores is accepted and flagged.
    """
    from sbprof.distributed.world import from_env

    world = from_env()
    if world is not None and world_sizes is not None:
        raise ConfigError(f"{file}: world_sizes makes sbprof launch its own torchrun worlds; under torchrun (this "
                          f"process is rank {world.rank} of {world.world_size}) leave it out")
    if world is None and world_sizes is None:
        return cfg
    sizes = (world.world_size,) if world is not None else tuple(sorted(check_list(world_sizes, "world_sizes",
                                                                                  True, file)))
    pre = cfg.preamble
    if world is not None and (len(pre.devices) > 1 or len(pre.cpu_threads) > 1):
        raise ConfigError(f"{file}: under torchrun each rank is one process: give one device and one cpu_threads "
                          f"value, got devices {list(pre.devices)} and cpu_threads {list(pre.cpu_threads)}")
    warnings: List[str] = list(pre.warnings)
    for setting in pre.settings:
        for n in sizes:
            # A node holds LOCAL_WORLD_SIZE of torchrun's ranks (one GPU each); sbprof's own worlds are one node.
            _check_backend(setting.device, n if world is None else world.local_world_size, file)
            if setting.device == "cpu" and n * setting.threads > (os.cpu_count() or 1):
                warnings.append(f"world size {n} x {setting.threads} thread(s) exceeds this machine's "
                                f"{os.cpu_count() or 1} logical cores: that world is oversubscribed")
    if "strong" in cfg.scaling:
        uneven = [n for n in sizes if cfg.data.batch_size % n]
        if uneven:
            raise ConfigError(f"{file}: data.batch_size {cfg.data.batch_size} cannot be split evenly over "
                              f"{uneven} ranks (strong scaling keeps the global batch): give a multiple of every "
                              "world size, or scaling: [weak]")
    return replace(cfg, world_sizes=sizes if world is None else None,
                   preamble=replace(pre, warnings=tuple(dict.fromkeys(warnings))))


def _check_backend(device: str, ranks_here: int, file: str) -> None:
    """The backend of ``device`` exists, and this machine has a GPU for each of its ``ranks_here`` ranks."""
    import torch

    if device == "cpu":
        if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
            raise ConfigError(f"{file}: {ranks_here} rank(s) on the CPU need torch.distributed's gloo backend, "
                              "which this torch build lacks")
        return
    if not torch.distributed.is_nccl_available():
        raise ConfigError(f"{file}: ranks on {device} need the NCCL backend, which this torch build lacks")
    if ranks_here > torch.cuda.device_count():
        raise ConfigError(f"{file}: world size {ranks_here} on CUDA needs one GPU per rank on this machine (NCCL); "
                          f"it has {torch.cuda.device_count()}")


def load_config(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None,
                      run_options: Optional[Mapping[str, Any]] = None) -> TrainConfig:
    """Load ``train_profile.yaml`` with command-line overrides and check it.

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.yaml").write_text("variants: [ctc]\\ndata: {batch_size: 2}\\n")
    >>> cfg = load_config(d / "t.yaml", {"measured": 3})
    >>> cfg.variants, cfg.data.batch_size, cfg.preamble.measured, cfg.preamble.warmup
    (('ctc',), 2, 3, 2)
    >>> load_config(d / "t.yaml", {"data": {"bach_size": 3}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: overrides=: unknown key 'data.bach_size' (did you mean 'data.batch_size'?)...
    """
    return validate(load_tree(path, overrides, SCHEMA), str(path), run_options)
