"""Loading a comparison YAML (HyperPyYAML, SpeechBrain-style overrides) into a checked :class:`CompareConfig`.

Everything a user can get wrong stops here, before any worker starts, with
one :class:`~sbprof.base.errors.ConfigError` naming the file, the key and the
value: the shared keys (:mod:`sbprof.jobs.preamble`), two variants of one
name, a variant that is neither an interface nor a module
(:mod:`sbprof.models.source`), a varied dimension that does not exist,
non-positive sizes, an unreadable recording or meter log.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from sbprof.analysis.series import VARIED
from sbprof.models.audio import check_example_audio
from sbprof.base.checks import (check_file_name, check_flag, check_int, check_list, check_text, is_positive_number,
                                 nearest)
from sbprof.compare_models.schema import DEFAULTS, SCHEMA, CompareConfig, EnergyConfig, Variant
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import check_preamble, load_tree
from sbprof.models.source import check_source
from sbprof.base.yamlconfig import resolve_path


def _variants(value: Any, file: str, base: Path) -> Tuple[Variant, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{file}: variants must be a non-empty list of variants, got {value!r}")
    variants = []
    for i, tree in enumerate(value):
        where = f"{file}: variants[{i}]"
        if not isinstance(tree, Mapping):
            raise ConfigError(f"{where} must be a mapping (name, source/type or yaml/module), got {tree!r}")
        name = tree.get("name")
        if name is None or name == "":
            raise ConfigError(f"{where}: missing 'name' (the label of this variant in tables and plots)")
        check_file_name(name, f"variants[{i}].name", file)  # it names the variant's worker log
        variants.append(Variant(name, check_source({k: v for k, v in tree.items() if k != "name"}, where, base)))
    names = [v.name for v in variants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{file}: variants: name(s) {twice} used twice; each variant needs its own name")
    return tuple(variants)


def _positive(tree: Mapping[str, Any], key: str, default: float, file: str) -> float:
    value = tree.get(key, default)
    if not is_positive_number(value):
        raise ConfigError(f"{file}: {key} must be a positive number, got {value!r}")
    return value


def _energy(tree: Any, file: str, base: Path) -> EnergyConfig:
    from sbprof.measuring.energy.external import load_power_csv

    tree = dict(tree or {})
    defaults = EnergyConfig()
    offset = tree.get("meter_clock_offset_s", 0.0)
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise ConfigError(f"{file}: energy.meter_clock_offset_s must be a number of seconds, got {offset!r}")
    meter_log = check_text(tree, "meter_log", f"{file}: energy")
    cfg = EnergyConfig(
        cpu=check_flag(tree.get("cpu", True), "energy.cpu", file),
        gpu=check_flag(tree.get("gpu", True), "energy.gpu", file),
        powercap_root=check_text(tree, "powercap_root", f"{file}: energy") or defaults.powercap_root,
        meter_log=str(resolve_path(meter_log, base).resolve()) if meter_log else None,
        meter_time_column=check_text(tree, "meter_time_column", f"{file}: energy") or defaults.meter_time_column,
        meter_watts_column=check_text(tree, "meter_watts_column", f"{file}: energy") or defaults.meter_watts_column,
        meter_clock_offset_s=float(offset))
    if cfg.meter_log:
        try:  # read now: a missing or broken log must not cost a run's measuring first
            load_power_csv(cfg.meter_log, cfg.meter_time_column, cfg.meter_watts_column, cfg.meter_clock_offset_s)
        except ConfigError as exc:
            raise ConfigError(f"{file}: energy.meter_log: {exc}") from None
    return cfg


def validate(tree: Any, file: str, base: Path, run_options: Optional[Mapping[str, Any]] = None) -> CompareConfig:
    """Check a loaded (and overridden) YAML tree and build the :class:`CompareConfig`.

    Example
    -------
    >>> cfg = validate({"variants": [{"name": "a", "source": "encoder_asr", "type": "EncoderASR"}],
    ...                 "vary": "audio_s", "values": [1, 2], "devices": "cpu", "cpu_threads": 1}, "c.yaml", Path("."))
    >>> cfg.vary, cfg.values, cfg.preamble.measured, cfg.variants[0].source.kind
    ('audio_s', (1, 2), 100, 'local_model')
    >>> validate({"variants": [{"name": "a", "source": "encoder_asr", "type": "EncoderASR"}],
    ...           "vary": "seconds", "values": [1]}, "c.yaml", Path("."))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: c.yaml: vary must be one of audio_s, frames, batch_size, got 'seconds'...
    """
    for key in ("variants", "vary", "values"):
        if tree.get(key) is None:
            raise ConfigError(f"{file}: missing key {key!r}")
    vary = tree["vary"]
    if vary not in VARIED:
        raise ConfigError(f"{file}: vary must be one of {', '.join(VARIED)}, got {vary!r}"
                          f"{nearest(str(vary), list(VARIED))}")
    values = check_list(tree["values"], "values", integers=vary != "audio_s", where=file)
    return CompareConfig(
        preamble=check_preamble(tree, file, run_options, DEFAULTS),
        variants=_variants(tree["variants"], file, base),
        vary=vary,
        values=tuple(sorted(values)),
        batch_size=check_int(tree.get("batch_size", 1), "batch_size", 1, file),
        audio_s=_positive(tree, "audio_s", 2.0, file),
        frame_shift_s=_positive(tree, "frame_shift_s", 0.01, file),
        example_audio=check_example_audio(tree.get("example_audio"), file, "example_audio", base),
        energy=_energy(tree.get("energy"), file, base),
    )


def load_config(path: str, overrides: Optional[Mapping[str, Any]] = None,
                        run_options: Optional[Mapping[str, Any]] = None) -> CompareConfig:
    """A comparison's YAML file with the command line's overrides and run options, checked."""
    return validate(load_tree(path, overrides, SCHEMA), str(path), Path(path).resolve().parent, run_options)
