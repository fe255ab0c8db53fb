"""``Measurement`` and the typed parts it carries: memory peaks, counts, energy, environment."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from sbprof.base.errors import ConfigError
from sbprof.record.cell import Cell
from sbprof.record.check import STATUSES, check_record
from sbprof.record.codec import Codec, from_json, to_json
from sbprof.base.stats import Stats, summarise

SCHEMA_VERSION = 2
SAMPLES = ("wall_s", "cpu_s", "cuda_s")


@dataclass
class MemoryPeak(Codec):
    """Peaks of one measured region, in bytes; ``None`` where not measured.

    ``*_delta_bytes`` are the peak minus the usage just before the region, so
    they show what the region itself added. ``rss_method`` says how the CPU
    peak was read (``clear_refs`` or ``psutil_sampling``) and ``heap_trim``
    whether freed heap was handed back first (``malloc_trim``), without which
    memory kept from earlier work can hide the region's growth.
    """

    peak_rss_bytes: Optional[int] = None
    peak_rss_delta_bytes: Optional[int] = None
    rss_method: Optional[str] = None
    heap_trim: Optional[str] = None
    peak_cuda_bytes: Optional[int] = None
    peak_cuda_delta_bytes: Optional[int] = None
    peak_cuda_reserved_bytes: Optional[int] = None


@dataclass
class Counts(Codec):
    """What a call computes and holds, per call: FLOPs, MACs and parameters (``None`` = not counted)."""

    flops: Optional[float] = None
    macs: Optional[float] = None
    params: Optional[int] = None
    trainable_params: Optional[int] = None


@dataclass
class Energy(Codec):
    """Energy of one time window, per domain, as read from counters or a meter.

    Arguments
    ---------
    duration_s : float
        Length of the window (monotonic clock).
    start_unix_s, end_unix_s : float
        The window on the wall clock, to line it up with an external meter's log.
    joules : dict
        Domain (``"cpu:package-0"``, ``"gpu:0"``, ``"meter"``) -> joules over the window.
    sources : dict
        Domain -> where its figure came from (``"rapl"``, ``"nvml"``, ``"meter"``).
    unavailable : dict
        Source -> the reason it could not be read here.
    calls : int
        Calls (e.g. inferences) the window held, for joules per call.

    Example
    -------
    >>> e = Energy(2.0, 0.0, 2.0, {"gpu:0": 300.0}, {"gpu:0": "nvml"}, {"rapl": "no powercap"}, calls=10)
    >>> e.watts(), e.per_call(), e.measurable
    ({'gpu:0': 150.0}, {'gpu:0': 30.0}, True)
    """

    duration_s: float
    start_unix_s: float
    end_unix_s: float
    joules: Dict[str, float] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    calls: int = 1

    @property
    def measurable(self) -> bool:
        """True when at least one domain was measured."""
        return bool(self.joules)

    def watts(self) -> Dict[str, float]:
        """Average power per domain over the window."""
        if self.duration_s <= 0:
            return {}
        return {d: j / self.duration_s for d, j in self.joules.items()}

    def per_call(self) -> Dict[str, float]:
        """Joules per call."""
        if self.calls < 1:
            raise ValueError(f"calls must be at least 1, got {self.calls}")
        return {d: j / self.calls for d, j in self.joules.items()}

    def describe(self) -> str:
        """One line for a report: the figures, or "not measurable here" with the reasons."""
        reasons = "; ".join(f"{src}: {why}" for src, why in self.unavailable.items())
        if not self.measurable:
            return f"not measurable here ({reasons})" if reasons else "not measurable here"
        watts = self.watts()
        parts = [f"{d} {j:.3g} J ({watts.get(d, float('nan')):.3g} W)" for d, j in self.joules.items()]
        return ", ".join(parts) + (f"; not measured: {reasons}" if reasons else "")


@dataclass
class Env(Codec):
    """Where a measurement was taken (filled by :func:`sbprof.measuring.env.collect_env`)."""

    python: str = ""
    platform: str = ""
    hostname: str = ""
    cpu: str = ""
    cpu_count: int = 0
    llc_bytes: Optional[int] = None
    torch: str = ""
    torchaudio: str = ""
    speechbrain: str = ""
    cuda: Optional[str] = None
    gpu: Optional[str] = None
    sbprof: str = ""
    git_commit: Optional[str] = None


@dataclass
class Measurement(Codec):
    """Raw samples, peaks, counts and energy of one measured callable (e.g. one sweep cell).

    Arguments
    ---------
    label : str
        What was measured, for people.
    cell : Cell
        Where it sits: model, device, threads, audio seconds, batch size...
    status : str
        ``ok``, ``skipped``, ``oom`` or ``error``; ``message`` says why.
    warmup : int
        Calls made before the measured ones (not in the samples).
    wall_s, cpu_s : list of float
        One sample per measured call (see ``sbprof.base.stats.METRICS``).
    cuda_s : list of float or None
        GPU time per call from CUDA events; ``None`` off CUDA.
    audio_seconds : float, optional
        Seconds of audio one call processes (all utterances): the RTF denominator.
    memory, counts, energy : optional
        Peaks of one call, FLOPs/parameters, energy of the measured window.
    settings : dict
        How it was measured (interface, method, sample rate, batches...).
    env : Env or None
        Machine and library versions.
    extra : dict
        Anything else worth keeping (e.g. the path of an exported trace).

    Example
    -------
    >>> m = Measurement(label="f", cell=Cell(device="cpu"), wall_s=[0.2, 0.1, 0.3], cpu_s=[0.2, 0.1, 0.3])
    >>> m.summary("wall_s").median
    0.2
    >>> Measurement.from_dict(m.to_dict()) == m
    True
    """

    label: str
    cell: Cell = field(default_factory=Cell)
    status: str = "ok"
    message: str = ""
    warmup: int = 0
    wall_s: List[float] = field(default_factory=list)
    cpu_s: List[float] = field(default_factory=list)
    cuda_s: Optional[List[float]] = None
    audio_seconds: Optional[float] = None
    memory: Optional[MemoryPeak] = None
    counts: Optional[Counts] = None
    energy: Optional[Energy] = None
    settings: Dict[str, Any] = field(default_factory=dict)
    env: Optional[Env] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    # Fields this sbprof does not know (added by hand or by a tool), kept so that saving again does not drop them.
    unknown: Dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ConfigError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self, metric: str = "wall_s") -> Stats:
        """Statistics of one raw-sample list (``wall_s``, ``cpu_s`` or ``cuda_s``)."""
        if metric not in SAMPLES:
            raise ConfigError(f"no sample list {metric!r} in a measurement; there are {', '.join(SAMPLES)}")
        samples = getattr(self, metric)
        if not samples:
            raise ConfigError(f"measurement {self.label!r} has no {metric} samples (status {self.status})")
        return summarise(samples)

    # More than the codec's field work: a record carries its schema version, is migrated from older ones and
    # checked field by field with the file's wording (sbprof.record.check), and keeps the keys it does not know
    # (the codec drops them) so that saving it again loses nothing.
    def to_dict(self) -> dict:
        d = to_json(self)
        del d["unknown"]
        return {"schema_version": SCHEMA_VERSION, **d, **self.unknown}

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        """A record from its dict (migrated from older versions); :class:`ConfigError` names a wrong field."""
        from sbprof.record.migrate import migrate_measurement

        migrated = migrate_measurement(d)
        check_record(migrated, complete=migrated is d)  # an older writer did not have every field of today's
        fields = {k: v for k, v in migrated.items() if k != "unknown"}
        m = from_json(cls, fields)
        m.unknown = {k: v for k, v in migrated.items() if k not in cls.__dataclass_fields__ and k != "schema_version"}
        return m
