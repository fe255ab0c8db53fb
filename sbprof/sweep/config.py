"""The profiling recipe's configuration: a HyperPyYAML file, validated into frozen dataclasses.

Everything a user can get wrong is checked here, before any worker starts or
any model loads: unknown or mistyped keys (with a "did you mean"), non-positive
durations or batch sizes, a missing example audio file, an unknown interface
type or local model, an unusable device. Each problem raises one
:class:`~sbprof.errors.ConfigError` naming the file, the key and the value.

Command-line overrides follow SpeechBrain: ``profile.yaml --seed 3
--output_folder out --profiling_dimensions "{batch_sizes: [1, 2]}"`` is parsed
by :func:`speechbrain.parse_arguments` and merged by HyperPyYAML (nested
mappings are merged key by key). SpeechBrain's own ``--device`` flag sets
``devices`` and ``--noprogressbar`` hides the progress bar; its training
flags mean nothing here and are refused.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from sbprof.errors import ConfigError

# The schema: every key the file may hold (nested mappings as nested dicts).
MODEL_KEYS = ("source", "type", "method", "args")
DIMENSION_KEYS = ("audio_mockup_secs", "batch_sizes", "example_audio", "triangle_only", "export_logs")
TOP_KEYS = (
    "pretrained_model", "profiling_dimensions", "devices", "cpu_threads", "cuda_threads",
    "warmup_batches", "measured_batches", "seed", "output_folder",
)
SCHEMA: Dict[str, Any] = {
    **{k: None for k in TOP_KEYS},
    "pretrained_model": {k: None for k in MODEL_KEYS},
    "profiling_dimensions": {k: None for k in DIMENSION_KEYS},
}
REQUIRED = {"pretrained_model": ("source", "type"), "profiling_dimensions": ("audio_mockup_secs", "batch_sizes")}

# SpeechBrain run options (``speechbrain.parse_arguments``) that mean something here.
_USED_RUN_OPTIONS = ("device", "noprogressbar")
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class ModelConfig:
    """Which model and how to call it (``pretrained_model`` in the YAML).

    Arguments
    ---------
    source : str
        A local model name (``sbprof.models.build.LOCAL_MODELS``), a local
        folder holding ``hyperparams.yaml``, or a hub id ``owner/name``.
    type : str
        A ``speechbrain.inference`` class name or a dotted path to a class.
    method, args
        Optional user-defined call: the method to call and how the batch is
        passed (see ``sbprof.interfaces.resolve_interface``).
    kind : str
        ``local_model``, ``folder`` or ``hub`` (derived from ``source``).
    """

    source: str
    type: str
    method: Optional[str] = None
    args: Any = None
    kind: str = "local_model"


@dataclass(frozen=True)
class Dimensions:
    """The grid (``profiling_dimensions`` in the YAML)."""

    audio_mockup_secs: Tuple[float, ...]
    batch_sizes: Tuple[int, ...]
    example_audio: Optional[str] = None
    triangle_only: bool = True
    export_logs: bool = False


@dataclass(frozen=True)
class Setting:
    """One worker process: a device and a torch thread count."""

    device: str
    threads: int

    @property
    def name(self) -> str:
        """Filesystem-safe name, e.g. ``cpu-2threads``."""
        return f"{self.device.replace(':', '')}-{self.threads}threads"


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: model, grid, settings and measuring schedule.

    Paths are absolute (relative ones in the YAML are resolved against the
    YAML file's folder, except ``output_folder``, which is resolved against
    the working directory as in SpeechBrain recipes).
    """

    pretrained_model: ModelConfig
    profiling_dimensions: Dimensions
    devices: Tuple[str, ...]
    cpu_threads: Tuple[int, ...]
    cuda_threads: int
    warmup_batches: int = 1
    measured_batches: int = 5
    seed: int = 1234
    output_folder: str = "results/profile"
    progress_bar: bool = True
    settings: Tuple[Setting, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        settings = []
        for device in self.devices:
            threads = self.cpu_threads if device == "cpu" else (self.cuda_threads,)
            settings.extend(Setting(device, n) for n in threads)
        object.__setattr__(self, "settings", tuple(settings))

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["settings"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SweepConfig":
        """Rebuild a config that :meth:`to_dict` wrote (already validated; used by workers)."""
        d = dict(d)
        d["pretrained_model"] = ModelConfig(**d["pretrained_model"])
        dims = dict(d["profiling_dimensions"])
        dims["audio_mockup_secs"] = tuple(dims["audio_mockup_secs"])
        dims["batch_sizes"] = tuple(dims["batch_sizes"])
        d["profiling_dimensions"] = Dimensions(**dims)
        d["devices"] = tuple(d["devices"])
        d["cpu_threads"] = tuple(d["cpu_threads"])
        return cls(**d)


def default_cpu_threads(cores: Optional[int] = None) -> Tuple[int, ...]:
    """Thread counts 1, 2, 4, ... up to ``cores``, plus ``cores`` itself.

    Example
    -------
    >>> default_cpu_threads(2), default_cpu_threads(6)
    ((1, 2), (1, 2, 4, 6))
    """
    cores = cores or os.cpu_count() or 1
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    if counts[-1] != cores:
        counts.append(cores)
    return tuple(counts)


def default_devices() -> Tuple[str, ...]:
    """``("cuda:0", "cpu")`` when CUDA is present, else ``("cpu",)``."""
    import torch

    return ("cuda:0", "cpu") if torch.cuda.is_available() else ("cpu",)


def parse_command_line(argv: Sequence[str]) -> Tuple[str, str, Dict[str, Any]]:
    """Split SpeechBrain-style arguments into the YAML path, overrides and run options.

    Returns
    -------
    param_file : str
    overrides : str
        YAML text of ``--key value`` overrides (HyperPyYAML merges it).
    run_options : dict
        The SpeechBrain run options that were given and that sbprof uses.

    Example
    -------
    >>> parse_command_line(["p.yaml", "--seed", "3", "--device", "cpu"])
    ('p.yaml', 'seed: 3', {'device': 'cpu'})
    """
    import speechbrain

    try:
        param_file, run_opts, overrides = speechbrain.parse_arguments(list(argv))
    except SystemExit as exc:  # argparse already printed why
        raise ConfigError(f"bad command line {' '.join(argv)!r}") from exc
    unused = sorted(set(run_opts.overridden_args) - set(_USED_RUN_OPTIONS))
    if unused:
        raise ConfigError(
            f"command-line option --{unused[0]} is a SpeechBrain training option; "
            f"sbprof does not use it (override YAML keys instead: {', '.join(TOP_KEYS)})"
        )
    used = {k: run_opts[k] for k in _USED_RUN_OPTIONS if k in run_opts.overridden_args}
    return param_file, overrides, used


def _where(file: str, key: str) -> str:
    return f"{file}: {key}" if key else file


def _check_keys(tree: Any, schema: Dict[str, Any], file: str, prefix: str = "") -> None:
    """Refuse any key not in ``schema`` (recursively), suggesting the closest known one."""
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{_where(file, prefix)}: expected a mapping of keys, got {tree!r}")
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f" (did you mean {(prefix + '.' if prefix else '') + close[0]!r}?)" if close else ""
            raise ConfigError(f"{file}: unknown key {name!r}{hint}; known keys here: {', '.join(schema)}")
        if isinstance(schema[key], dict) and value is not None:
            _check_keys(value, schema[key], file, name)


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool)
        and math.isfinite(value) and value > 0
    )


def _int_at_least(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _number_list(value: Any, file: str, key: str, integers: bool) -> Tuple[Any, ...]:
    what = "positive integers" if integers else "positive numbers of seconds"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{file}: {key} must be a non-empty list of {what}, got {value!r}")
    for v in value:
        if not (_int_at_least(v, 1) if integers else _positive_number(v)):
            raise ConfigError(f"{file}: {key} must hold only {what}, got {v!r} in {list(value)!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{file}: {key} lists a value twice: {list(value)!r}")
    return tuple(value)


def _flag(value: Any, file: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{file}: {key} must be True or False, got {value!r}")
    return value


def _count(value: Any, file: str, key: str, minimum: int) -> int:
    if not _int_at_least(value, minimum):
        raise ConfigError(f"{file}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def _resolve_path(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path


def _check_devices(value: Any, file: str) -> Tuple[str, ...]:
    import torch

    if value is None:
        return default_devices()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{file}: devices must be null or a list like [cpu, cuda:0], got {value!r}")
    devices = []
    for item in value:
        try:
            dev = torch.device(item)
        except (RuntimeError, TypeError):
            raise ConfigError(f"{file}: devices: {item!r} is not a device (use cpu, cuda or cuda:N)") from None
        if dev.type == "cuda":
            # Checked without creating a CUDA context in the parent: workers own the GPU.
            if not torch.cuda.is_available():
                raise ConfigError(f"{file}: devices: {item!r} asked for, but CUDA is not available on this machine")
            index = 0 if dev.index is None else dev.index
            if index >= torch.cuda.device_count():
                raise ConfigError(f"{file}: devices: {item!r}: only {torch.cuda.device_count()} CUDA device(s) here")
            name = f"cuda:{index}"
        elif dev.type == "cpu":
            name = "cpu"
        else:
            raise ConfigError(f"{file}: devices: {item!r}: only cpu and cuda[:N] are supported")
        if name in devices:
            raise ConfigError(f"{file}: devices lists {name!r} twice")
        devices.append(name)
    return tuple(devices)


def _check_model(tree: Mapping[str, Any], file: str, base: Path) -> ModelConfig:
    from sbprof.interfaces import interface_class, resolve_interface
    from sbprof.models.build import LOCAL_MODELS

    source, type_name = tree["source"], tree["type"]
    if not isinstance(source, str) or not source:
        raise ConfigError(f"{file}: pretrained_model.source must be a local model name, folder or hub id, got {source!r}")
    if not isinstance(type_name, str) or not type_name:
        raise ConfigError(f"{file}: pretrained_model.type must be an interface class name, got {type_name!r}")
    method, args = tree.get("method"), tree.get("args")
    if method is not None and not isinstance(method, str):
        raise ConfigError(f"{file}: pretrained_model.method must be a method name, got {method!r}")
    try:
        spec = resolve_interface(type_name, method=method, args=args)
        cls = interface_class(type_name)
    except ConfigError as exc:
        raise ConfigError(f"{file}: pretrained_model: {exc}") from None
    # Checked on the class, so a typo stops the run before any model loads.
    if not callable(getattr(cls, "from_hparams", None)):
        raise ConfigError(f"{file}: pretrained_model.type {type_name!r} has no from_hparams() to load it with")
    if not callable(getattr(cls, spec.method, None)):
        raise ConfigError(f"{file}: pretrained_model.method: {type_name} has no method {spec.method!r}")

    if source in LOCAL_MODELS:
        built_as = LOCAL_MODELS[source]
        if "." not in type_name and type_name != built_as:
            raise ConfigError(
                f"{file}: pretrained_model.type {type_name!r} does not fit local model {source!r}, "
                f"built as {built_as}"
            )
        return ModelConfig(source, type_name, method, args, kind="local_model")
    folder = _resolve_path(source, base)
    if folder.is_dir():
        if not (folder / "hyperparams.yaml").is_file():
            raise ConfigError(f"{file}: pretrained_model.source folder {str(folder)!r} holds no hyperparams.yaml")
        return ModelConfig(str(folder.resolve()), type_name, method, args, kind="folder")
    if _HUB_ID.match(source) and not source.startswith((".", "/")):
        return ModelConfig(source, type_name, method, args, kind="hub")
    close = difflib.get_close_matches(source, list(LOCAL_MODELS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(
        f"{file}: pretrained_model.source {source!r} is not a local model ({', '.join(LOCAL_MODELS)}), "
        f"an existing folder, or a hub id owner/name{hint}"
    )


def _check_example_audio(value: Any, file: str, base: Path) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{file}: profiling_dimensions.example_audio must be null or a path, got {value!r}")
    path = _resolve_path(value, base)
    if not path.is_file():
        raise ConfigError(f"{file}: profiling_dimensions.example_audio: no such file {str(path)!r}")
    import soundfile

    try:
        soundfile.info(str(path))
    except RuntimeError as exc:  # libsndfile's errors are RuntimeErrors
        raise ConfigError(f"{file}: profiling_dimensions.example_audio {str(path)!r} is not readable audio: {exc}") from None
    return str(path.resolve())


def validate(tree: Mapping[str, Any], file: str, base: Path, run_options: Optional[Mapping[str, Any]] = None) -> SweepConfig:
    """Check a loaded YAML tree against the schema and build the :class:`SweepConfig`.

    Arguments
    ---------
    tree : mapping
        The loaded (and overridden) YAML.
    file : str
        Named in every error message.
    base : Path
        Folder that relative input paths are resolved against.
    run_options : mapping, optional
        ``device`` / ``noprogressbar`` from the command line.
    """
    run_options = dict(run_options or {})
    _check_keys(tree, SCHEMA, file)
    for section, keys in REQUIRED.items():
        if not isinstance(tree.get(section), Mapping):
            raise ConfigError(f"{file}: missing section {section!r} (with keys {', '.join(keys)})")
        for key in keys:
            if tree[section].get(key) is None:
                raise ConfigError(f"{file}: missing key '{section}.{key}'")
    dims = tree["profiling_dimensions"]
    devices = run_options.get("device") or tree.get("devices")
    output_folder = tree.get("output_folder") or "results/profile"
    if not isinstance(output_folder, str):
        raise ConfigError(f"{file}: output_folder must be a path, got {output_folder!r}")
    cpu_threads = tree.get("cpu_threads")
    cuda_threads = tree.get("cuda_threads")
    return SweepConfig(
        pretrained_model=_check_model(tree["pretrained_model"], file, base),
        profiling_dimensions=Dimensions(
            audio_mockup_secs=_number_list(dims["audio_mockup_secs"], file, "profiling_dimensions.audio_mockup_secs", False),
            batch_sizes=_number_list(dims["batch_sizes"], file, "profiling_dimensions.batch_sizes", True),
            example_audio=_check_example_audio(dims.get("example_audio"), file, base),
            triangle_only=_flag(dims.get("triangle_only", True), file, "profiling_dimensions.triangle_only"),
            export_logs=_flag(dims.get("export_logs", False), file, "profiling_dimensions.export_logs"),
        ),
        devices=_check_devices(devices, file),
        cpu_threads=default_cpu_threads() if cpu_threads is None
        else _number_list(cpu_threads, file, "cpu_threads", True),
        cuda_threads=(os.cpu_count() or 1) if cuda_threads is None else _count(cuda_threads, file, "cuda_threads", 1),
        warmup_batches=_count(tree.get("warmup_batches", 1), file, "warmup_batches", 0),
        measured_batches=_count(tree.get("measured_batches", 5), file, "measured_batches", 1),
        seed=_count(tree.get("seed", 1234), file, "seed", 0),
        output_folder=str(Path(os.path.expanduser(output_folder)).resolve()),
        progress_bar=not run_options.get("noprogressbar", False),
    )


def load_config(
    path: Union[str, Path],
    overrides: Union[str, Mapping[str, Any], None] = None,
    run_options: Optional[Mapping[str, Any]] = None,
) -> SweepConfig:
    """Load a HyperPyYAML sweep file, apply overrides and validate it.

    Arguments
    ---------
    path : str or Path
        The YAML file.
    overrides : str or mapping, optional
        YAML text or a mapping merged over the file (nested keys merged).
    run_options : mapping, optional
        See :func:`parse_command_line`.

    Returns
    -------
    SweepConfig

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "p.yaml").write_text("pretrained_model: {source: encoder_asr, type: EncoderASR}\\n"
    ...     "profiling_dimensions: {audio_mockup_secs: [1], batch_sizes: [1], bach_sizes: [2]}\\n")
    >>> load_config(d / "p.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: ...unknown key 'profiling_dimensions.bach_sizes' (did you mean 'profiling_dimensions.batch_sizes'?)...
    """
    import ruamel.yaml
    from hyperpyyaml import load_hyperpyyaml

    file = str(path)
    if not Path(path).is_file():
        raise ConfigError(f"{file}: no such configuration file")
    if isinstance(overrides, str):
        try:
            overrides = ruamel.yaml.YAML(typ="safe").load(overrides) if overrides.strip() else None
        except ruamel.yaml.YAMLError as exc:
            raise ConfigError(f"command-line overrides are not valid YAML: {exc}") from None
    if overrides:
        _check_keys(overrides, SCHEMA, "command-line override")
    try:
        with open(path) as f:
            tree = load_hyperpyyaml(f, overrides or None, overrides_must_match=False)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from None
    except (KeyError, ValueError, TypeError, ImportError, AttributeError) as exc:
        # HyperPyYAML raises these for bad !ref / !new / !name entries.
        raise ConfigError(f"{file}: cannot be loaded by HyperPyYAML: {type(exc).__name__}: {exc}") from None
    if tree is None:
        raise ConfigError(f"{file}: the file is empty")
    return validate(tree, file, Path(path).resolve().parent, run_options)
