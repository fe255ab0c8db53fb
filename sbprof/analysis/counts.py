"""A count command's results analysed once: the one record's result, typed, and its breakdown's step statistics.

``flops`` and ``params`` results are read into their record types through
the codec (a hand-edited file with a value of the wrong kind is one
:class:`~sbprof.base.errors.ConfigError`): :class:`FlopsResult` (a
:class:`~sbprof.record.flops.FlopCount` with its audio length) and
:class:`~sbprof.record.params.ParamCount`; the figures their report shows
are derived here: FLOPs per second of audio, the operators ordered by FLOPs.
A ``modules`` result is a :class:`~sbprof.record.breakdown.ModuleBreakdown`
with, through an interface, the seconds of audio of each call (``audio_s``):
its rows' CPU cost per second of audio is derived here (:func:`breakdown_steps`).
The row types are named here for the renderers, which import no record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from sbprof.analysis.counts_payload import counts_payload
from sbprof.analysis.figures import Outcome
from sbprof.analysis.breakdown import ModuleBreakdown, BreakdownSteps, breakdown_steps
from sbprof.record.flops import FlopCount, ModuleFlops, OperatorFlops
from sbprof.record.params import ModuleParams, ParamCount
from sbprof.record.codec import Codec
from sbprof.record.results import Results

__all__ = ["CountsSummary", "FlopsResult", "ModuleFlops", "ModuleParams", "OperatorFlops", "ParamCount", "analyse"]


@dataclass(frozen=True)
class FlopsResult(FlopCount):
    """A ``flops`` job's result as saved: the count and the audio seconds it was made on (``None``: no audio)."""

    audio_s: Optional[float] = None

    @property
    def per_audio_s(self) -> Optional[float]:
        """Forward plus backward FLOPs per second of audio counted; ``None`` without an audio length.

        Example
        -------
        >>> FlopsResult(flops=2_000_000, macs=1_000_000, backward_flops=2_000_000, audio_s=4.0).per_audio_s
        1000000.0
        """
        if not self.audio_s:
            return None
        return (self.flops + (self.backward_flops or 0)) / self.audio_s

    @property
    def ranked(self) -> List[OperatorFlops]:
        """The operators, most FLOPs (forward plus backward) first."""
        return sorted(self.operators, key=lambda r: -(r.flops + r.backward_flops))


@dataclass(frozen=True)
class ModulesAudio(Codec):
    """The seconds of audio of each timed call, saved beside a ``modules`` breakdown (``None``: random tensors).

    Example
    -------
    >>> ModulesAudio.from_dict({"audio_s": 4.0, "rows": []}).audio_s
    4.0
    """

    audio_s: Optional[float] = None


@dataclass(frozen=True)
class CountsSummary:
    """What a count's report shows: the command, the target and its input, and the result (``flops``,
    ``params``, or the ``modules`` breakdown with its step statistics) or why there is none (``outcome``)."""

    command: str
    target: str
    input: str
    depth: int
    outcome: Optional[Outcome]
    flops: Optional[FlopsResult] = None
    params: Optional[ParamCount] = None
    breakdown: Optional[ModuleBreakdown] = None
    steps: Optional[BreakdownSteps] = None


def analyse(results: Results) -> CountsSummary:
    """The one analysis of a ``flops`` / ``params`` / ``modules`` results file."""
    record = results.records[-1] if results.records else None
    result = counts_payload(record).result if record is not None and record.ok else {}
    job = results.job
    modules = job == "modules" and bool(result)
    breakdown = ModuleBreakdown.from_dict(result) if modules else None
    audio_s = ModulesAudio.from_dict(result).audio_s if modules else None
    return CountsSummary(command=job, target=next(iter(results.models), "?"),
                         input=record.settings.get("input", "") if record is not None else "",
                         depth=int(results.rules.get("depth", 2)),
                         outcome=None if record is None else Outcome.of(record),
                         flops=FlopsResult.from_dict(result) if job == "flops" and result else None,
                         params=ParamCount.from_dict(result) if job == "params" and result else None,
                         breakdown=breakdown,
                         steps=breakdown_steps(breakdown, audio_s_per_step=audio_s))
