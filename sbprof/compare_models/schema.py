"""What a comparison YAML may hold, and the validated configuration it becomes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble
from sbprof.models.source import SOURCE_KEYS, ModelSource
from sbprof.record.codec import Codec

VARIANT_KEYS = ("name",) + SOURCE_KEYS
ENERGY_KEYS = ("cpu", "gpu", "powercap_root", "meter_log", "meter_time_column", "meter_watts_column",
               "meter_clock_offset_s")
SCHEMA: Dict[str, Any] = {
    **PREAMBLE, "variants": None, "vary": None, "values": None, "batch_size": None, "audio_s": None,
    "frame_shift_s": None, "example_audio": None, "energy": {k: None for k in ENERGY_KEYS},
}
DEFAULTS = Defaults(warmup=2, measured=100, output_folder="results/compare")


@dataclass(frozen=True)
class Variant(Codec):
    """One model or variant to measure: its name (its label in tables and plots) and where it comes from.

    Example
    -------
    >>> v = Variant("beam1", ModelSource(kind="local_model", source="encoder_decoder_asr", type="EncoderDecoderASR",
    ...                                  overrides={"beam_size": 1}))
    >>> Variant.from_dict(v.to_dict()) == v, v.source.name
    (True, 'encoder_decoder_asr')
    """

    name: str
    source: ModelSource


@dataclass(frozen=True)
class EnergyConfig:
    """Which counters to read around the measured window, and an optional external meter log."""

    cpu: bool = True
    gpu: bool = True
    powercap_root: str = "/sys/class/powercap"
    meter_log: Optional[str] = None
    meter_time_column: str = "timestamp"
    meter_watts_column: str = "watts"
    meter_clock_offset_s: float = 0.0


@dataclass(frozen=True)
class CompareConfig(Codec):
    """A validated comparison: the shared preamble, the variants, the varied dimension and the energy counters.

    ``values`` are the varied dimension's points; ``batch_size`` and
    ``audio_s`` are the fixed coordinates (``audio_s`` is used when the batch
    size varies). Relative input paths are resolved against the YAML file's
    folder; ``output_folder`` against the working directory.
    """

    preamble: Preamble
    variants: Tuple[Variant, ...]
    vary: str
    values: Tuple[float, ...]
    batch_size: int = 1
    audio_s: float = 2.0
    frame_shift_s: float = 0.01
    example_audio: Optional[str] = None
    energy: EnergyConfig = field(default_factory=EnergyConfig)

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)
