"""Checking a loaded sweep YAML tree, key by key, into a :class:`~sbprof.sweep.schema.SweepConfig`.

Everything a user can get wrong is checked here, before any worker starts or
any model loads: unknown or mistyped keys (with a "did you mean"), non-positive
durations or batch sizes, a missing or empty example recording, an unknown
interface type or local model, an unusable device. Each problem raises one
:class:`~sbprof.errors.ConfigError` naming the file, the key and the value.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

from sbprof.checks import check_flag, check_int, check_list, is_positive_number, nearest, parse_device
from sbprof.errors import ConfigError
from sbprof.yamlconfig import EXAMPLE_TOKEN, check_keys, resolve_path, shipped_example
from sbprof.sweep.schema import (DEFAULT_OUTPUT_FOLDER, REQUIRED, SCHEMA, Dimensions, ModelConfig, Predict, Repeats,
                                 SweepConfig)

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
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


def _check_devices(value: Any, file: str) -> Tuple[str, ...]:
    import torch

    if value is None:
        return ("cuda:0", "cpu") if torch.cuda.is_available() else ("cpu",)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{file}: devices must be null or a list like [cpu, cuda:0], got {value!r}")
    devices: List[str] = []
    for item in value:
        kind, index = parse_device(item, file, "devices")
        if kind == "cuda":
            # Checked without creating a CUDA context in the parent: workers own the GPU.
            if not torch.cuda.is_available():
                raise ConfigError(f"{file}: devices: {item!r} asked for, but CUDA is not available on this machine")
            index = index or 0
            if index >= torch.cuda.device_count():
                raise ConfigError(f"{file}: devices: {item!r}: only {torch.cuda.device_count()} CUDA device(s) here")
            name = f"cuda:{index}"
        else:
            name = "cpu"
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
        # The class first: a misspelt type is "no such class", not "give method and args".
        cls = interface_class(type_name)
        spec = resolve_interface(type_name, method=method, args=args)
    except ConfigError as exc:
        raise ConfigError(f"{file}: pretrained_model: {exc}") from None
    if not callable(getattr(cls, "from_hparams", None)):
        raise ConfigError(f"{file}: pretrained_model.type {type_name!r} has no from_hparams() to load it with")
    if not callable(getattr(cls, spec.method, None)):
        raise ConfigError(f"{file}: pretrained_model.method: {type_name} has no method {spec.method!r}")

    if source in LOCAL_MODELS:
        built_as = LOCAL_MODELS[source]
        if "." not in type_name and type_name != built_as:
            raise ConfigError(
                f"{file}: pretrained_model.type {type_name!r} does not fit local model {source!r}, "
                f"built as {built_as}")
        return ModelConfig(source, type_name, method, args, kind="local_model")
    folder = resolve_path(source, base)
    if folder.is_dir():
        if not (folder / "hyperparams.yaml").is_file():
            raise ConfigError(f"{file}: pretrained_model.source folder {str(folder)!r} holds no hyperparams.yaml")
        return ModelConfig(str(folder.resolve()), type_name, method, args, kind="folder")
    if _HUB_ID.match(source) and not source.startswith((".", "/")):
        return ModelConfig(source, type_name, method, args, kind="hub")
    raise ConfigError(
        f"{file}: pretrained_model.source {source!r} is not a local model ({', '.join(LOCAL_MODELS)}), "
        f"an existing folder ({str(folder)!r} is none), or a hub id owner/name{nearest(source, list(LOCAL_MODELS))}")


def _check_example_audio(value: Any, file: str, base: Path) -> Optional[str]:
    key = "profiling_dimensions.example_audio"
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{file}: {key} must be null, {EXAMPLE_TOKEN!r} or a path, got {value!r}")
    path = shipped_example() if value == EXAMPLE_TOKEN else resolve_path(value, base)
    if path.is_dir():
        raise ConfigError(f"{file}: {key} {str(path.resolve())!r} is a folder, not an audio file")
    if not path.is_file():
        raise ConfigError(f"{file}: {key}: no such file {str(path.resolve())!r}")
    import soundfile

    try:
        info = soundfile.info(str(path))
    except RuntimeError as exc:  # libsndfile's errors are RuntimeErrors
        raise ConfigError(f"{file}: {key} {str(path)!r} is not readable audio: {exc}") from None
    if info.frames == 0:
        raise ConfigError(f"{file}: {key} {str(path)!r} holds no samples (a valid header, no audio)")
    return str(path.resolve())


def _check_output_folder(value: Any, file: str) -> str:
    if value is None:
        value = DEFAULT_OUTPUT_FOLDER
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{file}: output_folder must be a non-empty path, got {value!r}")
    return str(Path(os.path.expanduser(value)).resolve())


def _check_threads(value: Any, file: str, warnings: List[str]) -> Tuple[int, ...]:
    if value is None:
        return default_cpu_threads()
    threads = check_list(value, "cpu_threads", integers=True, where=file)
    cores = os.cpu_count() or 1
    too_many = [n for n in threads if n > cores]
    if too_many:
        # Accepted: oversubscription is a real deployment question; the report says so.
        warnings.append(f"cpu_threads {too_many} exceed this machine's {cores} logical cores: those settings "
                        "measure threads competing for cores (oversubscribed)")
    return threads


def _check_repeats(tree: Any, file: str) -> Repeats:
    if tree is None:
        return Repeats()
    default = Repeats()
    runs = tree.get("runs", default.runs)
    if runs != "adaptive":
        check_int(runs, "repeats.runs ('adaptive' or a number of runs)", 1, file)
    target = tree.get("target", default.target)
    if not (isinstance(target, (int, float)) and not isinstance(target, bool) and 0 < target < 1):
        raise ConfigError(f"{file}: repeats.target must be a fraction of the median in (0, 1), e.g. 0.03 for +-3%, "
                          f"got {target!r}")
    confidence = tree.get("confidence", default.confidence)
    if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
        raise ConfigError(f"{file}: repeats.confidence must be a level in [0.5, 1), e.g. 0.95, got {confidence!r}")
    min_runs = check_int(tree.get("min_runs", default.min_runs), "repeats.min_runs", 1, file)
    max_runs = check_int(tree.get("max_runs", default.max_runs), "repeats.max_runs", 1, file)
    if max_runs < min_runs:
        raise ConfigError(f"{file}: repeats.max_runs ({max_runs}) must be at least repeats.min_runs ({min_runs})")
    return Repeats(runs=runs, target=float(target), min_runs=min_runs, max_runs=max_runs, confidence=confidence)


def _check_predict(tree: Any, file: str) -> Predict:
    if tree is None:
        return Predict()
    default = Predict()
    over = tree.get("skip_predicted_over", default.skip_predicted_over)
    if over is not None and over != "device" and not is_positive_number(over):
        raise ConfigError(f"{file}: predict.skip_predicted_over must be null, 'device' or a number of GB, got {over!r}")
    return Predict(fill=check_flag(tree.get("fill", default.fill), "predict.fill", file),
                   validate=check_flag(tree.get("validate", default.validate), "predict.validate", file),
                   skip_predicted_over=over)


def validate(tree: Any, file: str, base: Path, run_options: Optional[Mapping[str, Any]] = None) -> SweepConfig:
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
        ``device`` / ``noprogressbar`` / ``retry_failed`` from the command line.
    """
    run_options = dict(run_options or {})
    if tree is None:
        raise ConfigError(f"{file}: the file is empty")
    check_keys(tree, SCHEMA, file)
    for section, keys in REQUIRED.items():
        if not isinstance(tree.get(section), Mapping):
            raise ConfigError(f"{file}: missing section {section!r} (with keys {', '.join(keys)})")
        for key in keys:
            if tree[section].get(key) is None:
                raise ConfigError(f"{file}: missing key '{section}.{key}'")
    dims = tree["profiling_dimensions"]
    warnings: List[str] = []
    cuda_threads = tree.get("cuda_threads")
    return SweepConfig(
        pretrained_model=_check_model(tree["pretrained_model"], file, base),
        profiling_dimensions=Dimensions(
            audio_mockup_secs=check_list(dims["audio_mockup_secs"], "profiling_dimensions.audio_mockup_secs",
                                         integers=False, where=file),
            batch_sizes=check_list(dims["batch_sizes"], "profiling_dimensions.batch_sizes", integers=True,
                                   where=file),
            example_audio=_check_example_audio(dims.get("example_audio"), file, base),
            triangle_only=check_flag(dims.get("triangle_only", True), "profiling_dimensions.triangle_only", file),
            export_logs=check_flag(dims.get("export_logs", False), "profiling_dimensions.export_logs", file),
        ),
        devices=_check_devices(run_options.get("device") or tree.get("devices"), file),
        cpu_threads=_check_threads(tree.get("cpu_threads"), file, warnings),
        cuda_threads=(os.cpu_count() or 1) if cuda_threads is None else check_int(cuda_threads, "cuda_threads", 1, file),
        warmup_batches=check_int(tree.get("warmup_batches", 1), "warmup_batches", 0, file),
        measured_batches=check_int(tree.get("measured_batches", 5), "measured_batches", 1, file),
        repeats=_check_repeats(tree.get("repeats"), file),
        noise_floor=check_flag(tree.get("noise_floor", True), "noise_floor", file),
        predict=_check_predict(tree.get("predict"), file),
        seed=check_int(tree.get("seed", 1234), "seed", 0, file),
        output_folder=_check_output_folder(tree.get("output_folder"), file),
        progress_bar=not run_options.get("noprogressbar", False),
        retry_failed=bool(run_options.get("retry_failed", False)),
        warnings=tuple(warnings),
    )
