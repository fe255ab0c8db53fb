"""A count command's results analysed once: the one record's result, and its breakdown's step statistics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from sbprof.analysis.train import breakdown_steps
from sbprof.record import Measurement
from sbprof.record.results import Results
from sbprof.base.stats import Stats


@dataclass(frozen=True)
class CountsSummary:
    """What a count's report shows: the command, the target and its input, the result (or why none)."""

    command: str
    target: str
    input: str
    depth: int
    record: Optional[Measurement]
    result: Dict[str, Any]
    steps: Optional[Stats]


def analyse(results: Results) -> CountsSummary:
    """The one analysis of a ``flops`` / ``params`` / ``modules`` results file."""
    record = results.records[-1] if results.records else None
    result = (record.extra.get("result") or {}) if record is not None and record.ok else {}
    return CountsSummary(command=results.job, target=next(iter(results.models), "?"),
                         input=record.settings.get("input", "") if record is not None else "",
                         depth=int(results.rules.get("depth", 2)), record=record, result=result,
                         steps=breakdown_steps(result) if results.job == "modules" else None)
