"""What a profiling-sweep YAML may hold, and the validated configuration it becomes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble, Repeats, Setting
from sbprof.models.source import SOURCE_KEYS, ModelSource
from sbprof.record.codec import Codec

DIMENSION_KEYS = ("audio_mockup_secs", "batch_sizes", "example_audio", "triangle_only", "export_logs")
PREDICT_KEYS = ("fill", "validate", "skip_predicted_over")
SCHEMA: Dict[str, Any] = {
    **PREAMBLE,
    "pretrained_model": {k: None for k in SOURCE_KEYS},
    "profiling_dimensions": {k: None for k in DIMENSION_KEYS},
    "noise_floor": None,
    "predict": {k: None for k in PREDICT_KEYS},
}
MEASURED_MIN_S = 0.25
MEASURED_MAX = 30
"""Measured batches go on past ``measured`` until they add up to ``MEASURED_MIN_S`` seconds (at most
``MEASURED_MAX``): a fast cell's run median then rests on enough batches that one pre-empted batch cannot move
it, for a fraction of a second, where one more run costs a process start and a model load."""
REQUIRED = {"pretrained_model": ("source", "type"), "profiling_dimensions": ("audio_mockup_secs", "batch_sizes")}
DEFAULTS = Defaults(warmup=1, measured=3, output_folder="results/profile",
                    repeats=Repeats(runs="adaptive", target=0.05, min_runs=4, max_runs=8))


@dataclass(frozen=True)
class Dimensions:
    """The grid (``profiling_dimensions`` in the YAML)."""

    audio_mockup_secs: Tuple[float, ...]
    batch_sizes: Tuple[int, ...]
    example_audio: Optional[str] = None
    triangle_only: bool = True
    export_logs: bool = False


@dataclass(frozen=True)
class Predict:
    """Predicted cells (``predict`` in the YAML): fill skipped / OOM cells, validate, skip up front.

    ``skip_predicted_over``: ``None`` (off), ``"device"`` (the device's memory)
    or a number of GB: cells whose predicted peak memory exceeds it are
    skipped before they run.
    """

    fill: bool = True
    validate: bool = True
    skip_predicted_over: Any = None


@dataclass(frozen=True)
class SweepConfig(Codec):
    """A validated sweep: the shared preamble, the model, the grid, and what is predicted.

    Paths are absolute (relative ones in the YAML are resolved against the
    YAML file's folder, except ``output_folder``, which is resolved against
    the working directory as in SpeechBrain recipes).
    """

    preamble: Preamble
    pretrained_model: ModelSource
    profiling_dimensions: Dimensions
    noise_floor: bool = True
    predict: Predict = field(default_factory=Predict)

    @property
    def settings(self) -> Tuple[Setting, ...]:
        return self.preamble.settings
