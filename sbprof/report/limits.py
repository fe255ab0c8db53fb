"""The "What limits this" section every report ends with: the verdicts of :mod:`sbprof.analysis.limits`, formatted.

Example
-------
>>> from sbprof.analysis.limits import data_loading, limits
>>> print(render_limits(limits([data_loading(0.03, 0.01)], ["threads: one thread setting only"])))
## What limits this
<BLANKLINE>
1. **data loading.** Waiting for data takes 75 % of each step (30.0 ms wait beside a 10.0 ms step).
   - figures: data wait 30.0 ms; step 10.0 ms; wait share 75 %
   - rule: data wait > 10 % of the loop (wait + between + step)
   - try: more DataLoader workers (num_workers), pin_memory, or decode and resample the audio ahead of training
<BLANKLINE>
Not decided: threads: one thread setting only.
<BLANKLINE>
Each verdict fires when its rule's threshold is passed (the thresholds and their reasons: sbprof's README,
"What limits this"); its figures come from the tables above.
"""
from __future__ import annotations

from typing import List

from sbprof.analysis.limits import Figure, Limits
from sbprof.report.format import sig3


def _value(value: float, unit: str) -> str:
    if unit == "share":
        return f"{value * 100:.3g} %"
    if unit == "s" and abs(value) < 1:
        return f"{sig3(value * 1e3)} ms"
    return f"{sig3(value)}" + (f" {unit}" if unit else "")


def _figure(f: Figure) -> str:
    text = f"{f.name} {_value(f.value, f.unit)}"
    if f.low is not None and f.high is not None:
        text += f" [{_value(f.low, f.unit)}, {_value(f.high, f.unit)}]"
    return text


def render_limits(limits: Limits) -> str:
    """Markdown of a report's last section (also when nothing fired: it says so)."""
    lines: List[str] = ["## What limits this", ""]
    for i, v in enumerate(limits.verdicts, 1):
        lines += [f"{i}. **{v.rule}.** {v.sentence}",
                  f"   - figures: {'; '.join(_figure(f) for f in v.figures)}",
                  f"   - rule: {v.threshold}",
                  f"   - try: {v.advice}"]
    if not limits.verdicts:
        lines.append("No rule fired: no limit passed its threshold in these figures.")
    if limits.undecided:
        lines += ["", "Not decided: " + "; ".join(limits.undecided) + "."]
    lines += ["", "Each verdict fires when its rule's threshold is passed (the thresholds and their reasons: sbprof's "
              "README,", '"What limits this"); its figures come from the tables above.']
    return "\n".join(lines)
