"""Checking a loaded sweep YAML tree, key by key, into a :class:`~sbprof.sweep.schema.SweepConfig`.

Everything a user can get wrong is checked here, before any worker starts or
any model loads: the shared keys (:mod:`sbprof.jobs.preamble`), the model
(:mod:`sbprof.models.source`), non-positive durations or batch sizes, a
missing, empty or silent example recording. Each problem raises one
:class:`~sbprof.base.errors.ConfigError` naming the file, the key and the value.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from sbprof.models.audio import check_example_audio
from sbprof.base.checks import check_flag, check_list, is_positive_number
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import check_preamble
from sbprof.models.source import check_source
from sbprof.sweep.schema import DEFAULTS, REQUIRED, Dimensions, Predict, SweepConfig


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
    """Check a loaded (and overridden) YAML tree against the schema and build the :class:`SweepConfig`.

    Arguments
    ---------
    tree : mapping
        The loaded YAML (its keys already checked against the schema).
    file : str
        Named in every error message.
    base : Path
        Folder that relative input paths are resolved against.
    run_options : mapping, optional
        ``device`` / ``noprogressbar`` / ``retry_failed`` from the command line.
    """
    for section, keys in REQUIRED.items():
        if not isinstance(tree.get(section), Mapping):
            raise ConfigError(f"{file}: missing section {section!r} (with keys {', '.join(keys)})")
        for key in keys:
            if tree[section].get(key) is None:
                raise ConfigError(f"{file}: missing key '{section}.{key}'")
    dims = tree["profiling_dimensions"]
    return SweepConfig(
        preamble=check_preamble(tree, file, run_options, DEFAULTS),
        pretrained_model=check_source(tree["pretrained_model"], f"{file}: pretrained_model", base),
        profiling_dimensions=Dimensions(
            audio_mockup_secs=check_list(dims["audio_mockup_secs"], "profiling_dimensions.audio_mockup_secs",
                                         integers=False, where=file),
            batch_sizes=check_list(dims["batch_sizes"], "profiling_dimensions.batch_sizes", integers=True,
                                   where=file),
            example_audio=check_example_audio(dims.get("example_audio"), file, "profiling_dimensions.example_audio",
                                              base),
            triangle_only=check_flag(dims.get("triangle_only", True), "profiling_dimensions.triangle_only", file),
            export_logs=check_flag(dims.get("export_logs", False), "profiling_dimensions.export_logs", file),
        ),
        noise_floor=check_flag(tree.get("noise_floor", True), "noise_floor", file),
        predict=_check_predict(tree.get("predict"), file),
    )
