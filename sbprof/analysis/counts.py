"""A count command's results analysed once: the one record's result, typed, and its breakdown's step statistics.

``flops`` and ``params`` results are read into :class:`FlopsCount` and
:class:`ParamsCount` (through the codec: a hand-edited file with a value of
the wrong kind is one :class:`~sbprof.base.errors.ConfigError`), with the
figures their report shows derived here: FLOPs per second of audio, the
operators ordered by FLOPs, each operator's calls over both passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from sbprof.analysis.figures import Outcome
from sbprof.analysis.breakdown import ModuleBreakdown, BreakdownSteps, breakdown_steps
from sbprof.record.codec import Codec
from sbprof.record.results import Results


@dataclass(frozen=True)
class FlopsModule(Codec):
    """One module's FLOPs and MACs (forward, and backward when counted), at its ``depth`` in the tree."""

    name: str
    type: str
    depth: int
    calls: int
    flops: float
    macs: float
    backward_flops: Optional[float] = None
    backward_macs: Optional[float] = None


@dataclass(frozen=True)
class FlopsOperator(Codec):
    """One operator's FLOPs over the forward and the backward; ``total_calls`` is both passes' calls."""

    name: str
    calls: int
    flops: float
    backward_calls: int = 0
    backward_flops: float = 0

    @property
    def total_calls(self) -> int:
        return self.calls + self.backward_calls


@dataclass(frozen=True)
class FlopsCount(Codec):
    """A FLOP count as its result is saved; ``per_audio_s`` and ``ranked`` are derived by :func:`analyse`."""

    flops: float
    macs: float
    backward_flops: Optional[float] = None
    backward_macs: Optional[float] = None
    modules: List[FlopsModule] = field(default_factory=list)
    operators: List[FlopsOperator] = field(default_factory=list)
    untracked: Dict[str, int] = field(default_factory=dict)
    conventions: Optional[str] = None
    audio_s: Optional[float] = None

    @property
    def per_audio_s(self) -> Optional[float]:
        """Forward plus backward FLOPs per second of audio counted; ``None`` without an audio length.

        Example
        -------
        >>> FlopsCount(flops=2e6, macs=1e6, backward_flops=2e6, audio_s=4.0).per_audio_s
        1000000.0
        """
        if not self.audio_s:
            return None
        return (self.flops + (self.backward_flops or 0)) / self.audio_s

    @property
    def ranked(self) -> List[FlopsOperator]:
        """The operators, most FLOPs (forward plus backward) first."""
        return sorted(self.operators, key=lambda r: -(r.flops + r.backward_flops))


@dataclass(frozen=True)
class ParamsModule(Codec):
    """One submodule's parameters (shared tensors once), at its ``depth`` in the tree."""

    name: str
    type: str
    depth: int
    total: int
    trainable: int
    shared: bool = False


@dataclass(frozen=True)
class SharedTensor(Codec):
    """A tensor several parameter names point to, counted once."""

    numel: int
    names: List[str]


@dataclass(frozen=True)
class ParamsCount(Codec):
    """A parameter count as its result is saved."""

    total: int
    trainable: int
    frozen: int
    bytes_by_dtype: Dict[str, int] = field(default_factory=dict)
    buffers: int = 0
    modules: List[ParamsModule] = field(default_factory=list)
    shared: List[SharedTensor] = field(default_factory=list)


@dataclass(frozen=True)
class CountsSummary:
    """What a count's report shows: the command, the target and its input, and the result (``flops``,
    ``params``, or the ``modules`` breakdown with its step statistics) or why there is none (``outcome``)."""

    command: str
    target: str
    input: str
    depth: int
    outcome: Optional[Outcome]
    flops: Optional[FlopsCount] = None
    params: Optional[ParamsCount] = None
    breakdown: Optional[ModuleBreakdown] = None
    steps: Optional[BreakdownSteps] = None


def analyse(results: Results) -> CountsSummary:
    """The one analysis of a ``flops`` / ``params`` / ``modules`` results file."""
    record = results.records[-1] if results.records else None
    result = (record.extra.get("result") or {}) if record is not None and record.ok else {}
    job = results.job
    breakdown = ModuleBreakdown.from_dict(result) if job == "modules" and result else None
    return CountsSummary(command=job, target=next(iter(results.models), "?"),
                         input=record.settings.get("input", "") if record is not None else "",
                         depth=int(results.rules.get("depth", 2)),
                         outcome=None if record is None else Outcome.of(record),
                         flops=FlopsCount.from_dict(result) if job == "flops" and result else None,
                         params=ParamsCount.from_dict(result) if job == "params" and result else None,
                         breakdown=breakdown,
                         steps=breakdown_steps(breakdown))
