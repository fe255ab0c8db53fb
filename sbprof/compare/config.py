"""Loading a comparison YAML (HyperPyYAML, SpeechBrain-style overrides) into a checked :class:`CompareConfig`.

Everything a user can get wrong stops here, before any worker starts, with
one :class:`~sbprof.errors.ConfigError` naming the file, the key and the
value: unknown keys (with a "did you mean"), two variants of one name, a
variant that is neither an interface nor a module, an unknown interface or
local model, a missing module file, a varied dimension that does not exist,
non-positive sizes, an unusable device.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from sbprof.checks import check_flag, check_int, check_list, is_positive_number, nearest, parse_device
from sbprof.compare.schema import (DEFAULT_OUTPUT_FOLDER, DEFAULT_SAMPLES, MODULE_INPUTS, SCHEMA, VARIANT_KEYS,
                                   VARIED, CompareConfig, EnergyConfig, VariantSpec)
from sbprof.errors import ConfigError
from sbprof.yamlconfig import EXAMPLE_TOKEN, check_keys, load_yaml, shipped_example

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _path(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path


def _text(tree: Mapping[str, Any], key: str, where: str) -> Optional[str]:
    value = tree.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{where}.{key} must be a non-empty string, got {value!r}")
    return value


def _interface(tree: Mapping[str, Any], name: str, overrides: Dict[str, Any], where: str,
               base: Path) -> VariantSpec:
    from sbprof.interfaces import interface_class, resolve_interface
    from sbprof.models.build import LOCAL_MODELS

    source, type_name = _text(tree, "source", where), _text(tree, "type", where)
    if source is None or type_name is None:
        raise ConfigError(f"{where}: an interface variant needs both 'source' and 'type'")
    method = _text(tree, "method", where)
    try:
        cls = interface_class(type_name)
        spec = resolve_interface(type_name, method=method, args=tree.get("args"))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not callable(getattr(cls, "from_hparams", None)):
        raise ConfigError(f"{where}.type {type_name!r} has no from_hparams() to load it with")
    if not callable(getattr(cls, spec.method, None)):
        raise ConfigError(f"{where}.method: {type_name} has no method {spec.method!r}")
    common = dict(name=name, type=type_name, method=spec.method, args=spec.args, overrides=overrides)
    if source in LOCAL_MODELS:
        if "." not in type_name and type_name != LOCAL_MODELS[source]:
            raise ConfigError(f"{where}.type {type_name!r} does not fit local model {source!r}, "
                              f"built as {LOCAL_MODELS[source]}")
        return VariantSpec(source=source, kind="local_model", **common)
    folder = _path(source, base)
    if folder.is_dir():
        if not (folder / "hyperparams.yaml").is_file():
            raise ConfigError(f"{where}.source folder {str(folder)!r} holds no hyperparams.yaml")
        return VariantSpec(source=str(folder.resolve()), kind="folder", **common)
    if _HUB_ID.match(source) and not source.startswith((".", "/")):
        return VariantSpec(source=source, kind="hub", **common)
    raise ConfigError(f"{where}.source {source!r} is not a local model ({', '.join(LOCAL_MODELS)}), an existing "
                      f"folder, or a hub id owner/name{nearest(source, list(LOCAL_MODELS))}")


def _module(tree: Mapping[str, Any], name: str, overrides: Dict[str, Any], where: str, base: Path) -> VariantSpec:
    file, key = _text(tree, "yaml", where), _text(tree, "module", where)
    if key is None:
        raise ConfigError(f"{where}: a module variant needs 'module', the key of its YAML file that builds it")
    path = _path(file, base)
    if not path.is_file():
        raise ConfigError(f"{where}.yaml: no such file {str(path)!r}")
    kind = tree.get("input", "wavs")
    if kind not in MODULE_INPUTS:
        raise ConfigError(f"{where}.input must be one of {', '.join(MODULE_INPUTS)}, got {kind!r}")
    features = tree.get("features")
    if kind == "features":
        features = check_int(features, f"{where}.features", 1)
    elif features is not None:
        raise ConfigError(f"{where}.features is only for input: features")
    return VariantSpec(name=name, kind="module", yaml=str(path.resolve()), module=key, input=kind,
                       features=features, overrides=overrides)


def _variant(tree: Any, i: int, file: str, base: Path) -> VariantSpec:
    where = f"{file}: variants[{i}]"
    check_keys(tree, {k: None for k in VARIANT_KEYS}, file, f"variants[{i}]")
    name = _text(tree, "name", where)
    if name is None:
        raise ConfigError(f"{where}: missing 'name' (the label of this variant in tables and plots)")
    overrides = tree.get("overrides") or {}
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{where}.overrides must be a mapping of hyperparameters, got {overrides!r}")
    overrides = dict(overrides)
    is_module = tree.get("yaml") is not None
    if is_module and tree.get("source") is not None:
        raise ConfigError(f"{where}: give either source/type (a pretrained interface) or yaml/module (a module), "
                          "not both")
    if not is_module:
        stray = [k for k in ("module", "input", "features") if tree.get(k) is not None]
        if stray:
            raise ConfigError(f"{where}: {', '.join(stray)} apply to module variants (with 'yaml') only")
        return _interface(tree, name, overrides, where, base)
    return _module(tree, name, overrides, where, base)


def _variants(value: Any, file: str, base: Path) -> Tuple[VariantSpec, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{file}: variants must be a non-empty list of variants, got {value!r}")
    variants = tuple(_variant(tree, i, file, base) for i, tree in enumerate(value))
    names = [v.name for v in variants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{file}: variants: name(s) {twice} used twice; each variant needs its own name")
    return variants


def _device(value: Any, file: str) -> str:
    kind, index = parse_device(value if value is not None else "cpu", file, "device")
    if kind == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(f"{file}: device: {value!r} asked for, but CUDA is not available on this machine")
    return f"cuda:{index or 0}"


def _example(value: Any, file: str, base: Path) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{file}: example_audio must be null, {EXAMPLE_TOKEN!r} or a path, got {value!r}")
    path = shipped_example() if value == EXAMPLE_TOKEN else _path(value, base)
    if not path.is_file():
        raise ConfigError(f"{file}: example_audio: no such file {str(path)!r}")
    return str(path.resolve())


def _positive(tree: Mapping[str, Any], key: str, default: float, file: str) -> float:
    value = tree.get(key, default)
    if not is_positive_number(value):
        raise ConfigError(f"{file}: {key} must be a positive number, got {value!r}")
    return value


def _energy(tree: Any, file: str, base: Path) -> EnergyConfig:
    tree = dict(tree or {})
    defaults = EnergyConfig()
    meter_log = _text(tree, "meter_log", f"{file}: energy")
    offset = tree.get("meter_clock_offset_s", 0.0)
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise ConfigError(f"{file}: energy.meter_clock_offset_s must be a number of seconds, got {offset!r}")
    root = _text(tree, "powercap_root", f"{file}: energy") or defaults.powercap_root
    return EnergyConfig(
        cpu=check_flag(tree.get("cpu", True), "energy.cpu", file),
        gpu=check_flag(tree.get("gpu", True), "energy.gpu", file),
        powercap_root=root,
        meter_log=str(_path(meter_log, base).resolve()) if meter_log else None,
        meter_time_column=_text(tree, "meter_time_column", f"{file}: energy") or defaults.meter_time_column,
        meter_watts_column=_text(tree, "meter_watts_column", f"{file}: energy") or defaults.meter_watts_column,
        meter_clock_offset_s=float(offset),
    )


def validate(tree: Any, file: str, base: Path, run_options: Optional[Mapping[str, Any]] = None) -> CompareConfig:
    """Check a loaded (and overridden) YAML tree and build the :class:`CompareConfig`.

    Example
    -------
    >>> cfg = validate({"variants": [{"name": "a", "source": "encoder_asr", "type": "EncoderASR"}],
    ...                 "vary": "audio_s", "values": [1, 2]}, "c.yaml", Path("."))
    >>> cfg.vary, cfg.values, cfg.samples, cfg.variants[0].kind
    ('audio_s', (1, 2), 100, 'local_model')
    >>> validate({"variants": [{"name": "a", "source": "encoder_asr", "type": "EncoderASR"}],
    ...           "vary": "seconds", "values": [1]}, "c.yaml", Path("."))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: c.yaml: vary must be one of audio_s, frames, batch_size, got 'seconds'...
    """
    run_options = dict(run_options or {})
    if tree is None:
        raise ConfigError(f"{file}: the file is empty")
    check_keys(tree, SCHEMA, file)
    for key in ("variants", "vary", "values"):
        if tree.get(key) is None:
            raise ConfigError(f"{file}: missing key {key!r}")
    vary = tree["vary"]
    if vary not in VARIED:
        raise ConfigError(f"{file}: vary must be one of {', '.join(VARIED)}, got {vary!r}"
                          f"{nearest(str(vary), list(VARIED))}")
    values = check_list(tree["values"], "values", integers=vary != "audio_s", where=file)
    output = tree.get("output_folder") or DEFAULT_OUTPUT_FOLDER
    if not isinstance(output, str):
        raise ConfigError(f"{file}: output_folder must be a path, got {output!r}")
    return CompareConfig(
        variants=_variants(tree["variants"], file, base),
        vary=vary,
        values=tuple(sorted(values)),
        batch_size=check_int(tree.get("batch_size", 1), "batch_size", 1, file),
        audio_s=_positive(tree, "audio_s", 2.0, file),
        frame_shift_s=_positive(tree, "frame_shift_s", 0.01, file),
        samples=check_int(tree.get("samples", DEFAULT_SAMPLES), "samples", 1, file),
        warmup=check_int(tree.get("warmup", 2), "warmup", 0, file),
        runs=check_int(tree.get("runs", 1), "runs", 1, file),
        device=_device(run_options.get("device") or tree.get("device"), file),
        threads=check_int(tree.get("threads", 1), "threads", 1, file),
        example_audio=_example(tree.get("example_audio"), file, base),
        seed=check_int(tree.get("seed", 1234), "seed", 0, file),
        energy=_energy(tree.get("energy"), file, base),
        output_folder=str(Path(os.path.expanduser(output)).resolve()),
        progress_bar=not run_options.get("noprogressbar", False),
    )


def load_compare_config(path: str, overrides: Optional[Mapping[str, Any]] = None,
                        run_options: Optional[Mapping[str, Any]] = None) -> CompareConfig:
    """Load a comparison YAML, apply ``--key value`` overrides and validate it.

    Arguments
    ---------
    path : str
        The YAML file (HyperPyYAML).
    overrides : mapping, optional
        Merged over the file (nested keys merged), SpeechBrain-style.
    run_options : mapping, optional
        ``device`` and ``noprogressbar`` from the command line.
    """
    if overrides:
        check_keys(overrides, SCHEMA, "command line")
    tree = load_yaml(path, overrides)
    return validate(tree, str(path), Path(path).resolve().parent, run_options)

