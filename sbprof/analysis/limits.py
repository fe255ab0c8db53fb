"""What limits this: verdicts computed from a job's figures, each with the figures behind it, its rule and advice.

Every report ends with a few verdicts, most important first. A verdict is one
sentence naming its figures, the figures themselves (with their intervals),
the rule that fired with its threshold (one table, :data:`THRESHOLDS`, each
with its reason) and what to try. A rule whose figures cannot support it
(too noisy, too few cells) says so instead (:attr:`Limits.undecided`): it
never guesses. The rules take plain figures, so each is tested on a workload
built to have its limit and on one without it; each job's analysis calls the
rules that apply to its summary and keeps the :class:`Limits` in it, so
``results.json``, ``--render-only`` and ``sbprof merge`` show the same.

Example
-------
>>> v = data_loading(wait_s=0.03, step_s=0.01)
>>> v.rule, v.sentence
('data loading', 'Waiting for data takes 75 % of each step (30.0 ms wait beside a 10.0 ms step).')
>>> data_loading(wait_s=0.02, step_s=0.02, between_s=0.02).sentence
'Waiting for data takes 33 % of the loop (20.0 ms wait, 20.0 ms between, 20.0 ms step).'
>>> data_loading(wait_s=0.0002, step_s=0.01) is None
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.record.codec import Codec


@dataclass(frozen=True)
class Threshold:
    """One rule's threshold and why it sits there."""

    value: float
    text: str
    reason: str


THRESHOLDS: Dict[str, Threshold] = {
    "real-time": Threshold(1.0, "RTF < 1", "below 1 a setting processes audio faster than it arrives"),
    "data loading": Threshold(0.10, "data wait > 10 % of the loop (wait + between + step)", "a tenth of the loop "
                              "spent waiting for data is what one more DataLoader worker usually wins back; below "
                              "it, noise"),
    "dispatch-bound": Threshold(3.0, "CPU time per operator < 3x the dispatch floor, over >= 1,000 operators a "
                                "step", "within a few times the cost of launching an empty operator, the step pays "
                                "for dispatch, not for arithmetic"),
    "length-quadratic": Threshold(0.5, "the B*L^2 term > 50 % of the cost", "past half, doubling the length more "
                                  "than doubles the cost: attention's L x L maps lead"),
    "threads": Threshold(0.5, "parallel efficiency < 50 % per doubling of threads", "below half, the extra thread "
                         "costs more than it returns: more processes of fewer threads do more work"),
    "straggler": Threshold(0.05, "the slowest rank costs > 5 % of the step", "every rank waits for the slowest at "
                           "each all-reduce; a few per cent is the spread of identical ranks on one machine"),
    "communication": Threshold(0.20, "communication > 20 % of the step", "beyond a fifth, a larger per-rank batch or "
                               "gradient accumulation amortises the all-reduce"),
    "decoder": Threshold(1.0, "decode_chunk > encode_chunk per chunk", "the decoder, not the encoder, sets the "
                         "chunk's cost"),
    "memory": Threshold(1.0, "a cell ran out of memory, or the largest fitting cell is named", "the device's "
                        "memory bounds batch x length"),
    "noise": Threshold(1.0, "differences under the noise floor", "between fresh processes, a difference smaller "
                       "than the machine's run-to-run spread is not evidence"),
    # stream and transducer jobs (issue 33)
    "streams per machine": Threshold(1.0, "p99 delay <= the delay target, the delay not growing and no chunk "
                                     "unserved", "past the target a caller waits longer than was asked for; a "
                                     "growing delay is a queue that never drains"),
    "fastest backend": Threshold(0.95, "agrees with the reference, and its 95 % interval of the mean step lies "
                                 "below every other agreeing backend's", "a backend that disagrees computes another "
                                 "loss; backends whose intervals overlap are not ordered"),
    # profile and compare-models jobs (issue 33)
    "fit": Threshold(0.20, "held-out error of the fitted cost model or growth law < 20 %", "a fit that misses the "
                     "cells it was not fitted on by more than a fifth cannot place a crossing"),
    "cheapest": Threshold(1.0, "one variant's cost per audio second below the others' at equal size, quartiles "
                          "apart", "overlapping quartiles are one variant's calls mixed with the other's"),
    "crossover": Threshold(1.0, "two fitted growth laws cross inside the range both were measured over", "past the "
                           "crossing the other variant is the cheaper one"),
}
"""Every rule's threshold, with its reason (the README's table is written from this one)."""


@dataclass(frozen=True)
class Figure(Codec):
    """A figure behind a verdict: its value, unit (``s``, ``share`` for a fraction, ``""`` for a count...) and
    interval (``low``/``high``, when measured over runs)."""

    name: str
    value: float
    unit: str
    low: Optional[float] = None
    high: Optional[float] = None


@dataclass(frozen=True)
class Verdict(Codec):
    """One limit: the sentence, the figures behind it, the rule (with its threshold) and what to try.

    ``weight`` orders verdicts (the share of time or of the budget at stake, larger first).
    """

    rule: str
    sentence: str
    figures: List[Figure]
    threshold: str
    advice: str
    weight: float = 0.0


@dataclass(frozen=True)
class Limits(Codec):
    """A report's "What limits this": verdicts, most important first, and the rules that could not decide (why)."""

    verdicts: List[Verdict] = field(default_factory=list)
    undecided: List[str] = field(default_factory=list)


def limits(candidates: Sequence[Optional[Verdict]], undecided: Sequence[str] = ()) -> Limits:
    """The verdicts that fired, most important first, and the reasons others could not be decided.

    Example
    -------
    >>> l = limits([None, straggler(rank=1, cost_s=0.03, step_s=0.1), data_loading(0.05, 0.1)])
    >>> [v.rule for v in l.verdicts]
    ['data loading', 'straggler']
    """
    fired = [v for v in candidates if v is not None]
    return Limits(sorted(fired, key=lambda v: -v.weight), list(undecided))


def _num(x: float) -> str:
    """Three significant figures, plain (``0.0123``, ``12.3``, ``1230``)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def _ms(seconds: float) -> str:
    return f"{_num(seconds * 1e3)} ms"


def _pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def _rule(name: str) -> str:
    return THRESHOLDS[name].text


def data_loading(wait_s: float, step_s: float, between_s: Optional[float] = None) -> Optional[Verdict]:
    """Time waiting for the next batch (median per step) as a share of the loop: the wait, the step itself and,
    when given, the time between them (the rest of the loop's iteration); fires over the threshold."""
    if wait_s is None or step_s is None or wait_s + step_s + (between_s or 0.0) <= 0:
        return None
    share = wait_s / (wait_s + step_s + (between_s or 0.0))
    if share <= THRESHOLDS["data loading"].value:
        return None
    if between_s is None:
        sentence = f"Waiting for data takes {_pct(share)} of each step ({_ms(wait_s)} wait beside a {_ms(step_s)} step)."
        figures = [Figure("data wait", wait_s, "s"), Figure("step", step_s, "s")]
    else:
        sentence = (f"Waiting for data takes {_pct(share)} of the loop ({_ms(wait_s)} wait, {_ms(between_s)} "
                    f"between, {_ms(step_s)} step).")
        figures = [Figure("data wait", wait_s, "s"), Figure("between", between_s, "s"), Figure("step", step_s, "s")]
    return Verdict("data loading", sentence, figures + [Figure("wait share", share, "share")],
                   _rule("data loading"), "more DataLoader workers (num_workers), pin_memory, or decode and "
                   "resample the audio ahead of training", weight=share)


def dispatch_bound(operators_per_step: float, cpu_per_operator_s: float, floor_s: float) -> Optional[Verdict]:
    """Many operators a step, each costing close to the cost of dispatching an empty one (``floor_s``)."""
    if min(operators_per_step, cpu_per_operator_s, floor_s) <= 0:
        return None
    ratio = cpu_per_operator_s / floor_s
    if operators_per_step < 1000 or ratio >= THRESHOLDS["dispatch-bound"].value:
        return None
    return Verdict("dispatch-bound", f"Each step runs {operators_per_step:,.0f} operators at {_num(cpu_per_operator_s * 1e6)} "
                   f"µs of CPU each, {_num(ratio)}x the {_num(floor_s * 1e6)} µs dispatch floor.",
                   [Figure("operators per step", operators_per_step, ""),
                    Figure("CPU per operator", cpu_per_operator_s, "s"), Figure("dispatch floor", floor_s, "s")],
                   _rule("dispatch-bound"), "a bigger batch, torch.compile, or fused operators",
                   weight=1 - ratio / THRESHOLDS["dispatch-bound"].value)


def quadratic_crossing(linear: float, quadratic: float) -> Optional[float]:
    """The length L (s) where ``quadratic * L^2`` passes half of ``linear * L + quadratic * L^2`` (per utterance).

    Example
    -------
    >>> quadratic_crossing(linear=0.01, quadratic=0.001)
    10.0
    """
    return linear / quadratic if quadratic > 0 and linear >= 0 else None


def length_quadratic(linear: float, quadratic: float, longest_s: float) -> Optional[Verdict]:
    """The ``B*L^2`` term of a cost model passes half of the length-dependent cost within the lengths measured."""
    crossing = quadratic_crossing(linear, quadratic)
    if crossing is None or crossing > longest_s:
        return None
    share = quadratic * longest_s / (linear + quadratic * longest_s)
    return Verdict("length-quadratic", f"The length-quadratic term passes half of the cost at {_num(crossing)} s of "
                   f"audio and is {_pct(share)} of it at {_num(longest_s)} s.",
                   [Figure("crossing length", crossing, "s"), Figure("quadratic share at the longest", share, "share"),
                    Figure("longest measured", longest_s, "s")],
                   _rule("length-quadratic"), "chunked or limited-context attention, or split long utterances",
                   weight=share)


def threads(times_s: Dict[int, float]) -> Optional[Verdict]:
    """Time per call at each thread count: fires when a doubling's parallel efficiency is under the threshold."""
    counts = sorted(times_s)
    worst: Optional[Tuple[int, int, float]] = None
    for few, many in zip(counts, counts[1:]):
        efficiency = times_s[few] / times_s[many] / (many / few)
        if efficiency < THRESHOLDS["threads"].value and (worst is None or efficiency < worst[2]):
            worst = (few, many, efficiency)
    if worst is None:
        return None
    few, many, efficiency = worst
    return Verdict("threads", f"Going from {few} to {many} threads gives {_num(times_s[few] / times_s[many])}x, a "
                   f"parallel efficiency of {_pct(efficiency)}.",
                   [Figure(f"time at {n} threads", times_s[n], "s") for n in (few, many)]
                   + [Figure("parallel efficiency", efficiency, "share")],
                   _rule("threads"), f"run {many // few} processes of {few} thread(s) instead of one of {many}",
                   weight=1 - efficiency)


def straggler(rank: int, cost_s: float, step_s: float) -> Optional[Verdict]:
    """The slowest rank's cost to the others (median wait it makes them do) against the step."""
    if step_s <= 0:
        return None
    share = cost_s / step_s
    if share <= THRESHOLDS["straggler"].value:
        return None
    return Verdict("straggler", f"Rank {rank} is slowest and costs every step {_ms(cost_s)}, {_pct(share)} of the "
                   f"{_ms(step_s)} step.",
                   [Figure("straggler cost", cost_s, "s"), Figure("step", step_s, "s")], _rule("straggler"),
                   f"find what slows rank {rank} (its node, its data shard, another process on its cores)",
                   weight=share)


def communication(comm_s: float, step_s: float) -> Optional[Verdict]:
    """Communication (all-reduce and friends) per step, median over ranks, against the step."""
    if step_s <= 0 or comm_s is None:
        return None
    share = comm_s / step_s
    if share <= THRESHOLDS["communication"].value:
        return None
    return Verdict("communication", f"Communication takes {_pct(share)} of each step ({_ms(comm_s)} of "
                   f"{_ms(step_s)}).", [Figure("communication", comm_s, "s"), Figure("step", step_s, "s")],
                   _rule("communication"), "a larger per-rank batch, gradient accumulation, or a larger DDP "
                   "bucket_cap_mb", weight=share)


def decoder(decode_s: float, encode_s: float) -> Optional[Verdict]:
    """A streaming chunk's decoder time against its encoder time (medians per chunk)."""
    if encode_s <= 0 or decode_s <= encode_s * THRESHOLDS["decoder"].value:
        return None
    return Verdict("decoder", f"The decoder takes {_num(decode_s / encode_s)}x the encoder per chunk "
                   f"({_ms(decode_s)} against {_ms(encode_s)}).",
                   [Figure("decode per chunk", decode_s, "s"), Figure("encode per chunk", encode_s, "s")],
                   _rule("decoder"), "a smaller beam, greedy decoding, or a lighter language model in the search",
                   weight=decode_s / (decode_s + encode_s))


def noise(floor: float, differences: Sequence[float], what: str) -> Optional[str]:
    """Why differences cannot be decided: each relative difference lies under the machine's noise floor."""
    if not differences or floor <= 0 or max(abs(d) for d in differences) >= floor:
        return None
    return (f"the machine's noise floor ({floor * 100:.1f} %) hides differences under that size: {what} differ by "
            f"at most {max(abs(d) for d in differences) * 100:.1f} %")


# -- stream and transducer jobs (issue 33) --------------------------------------------------------------------------

def streams_per_machine(streams: float, target_s: float, delay_p99_s: Optional[float], where: str,
                        utilisation: Optional[float] = None, at_limit: bool = False,
                        span: Optional[Tuple[int, int]] = None) -> Verdict:
    """A capacity search's result: the streams one process serves within the delay target (``delay_p99_s``: the
    p99 delay at that count, or at one stream when even one misses the target); ``where``: the setting searched;
    ``span``: the lowest and highest capacity repeated probes at the boundary gave.

    Example
    -------
    >>> streams_per_machine(0, 0.2, 0.35, "cpu, 1 thread").sentence
    'Even one stream misses the 200 ms delay target on cpu, 1 thread: its p99 delay is 350 ms.'
    >>> streams_per_machine(9, 0.2, 0.1, "cpu, 1 thread", span=(8, 10)).sentence
    'One process on cpu, 1 thread serves 9 stream(s) (8 to 10 over repeated probes) within the 200 ms delay target (p99 delay 100 ms).'
    """
    figures = [Figure("streams per machine", streams, "", *(span or (None, None))),
               Figure("delay target", target_s, "s")]
    if delay_p99_s is not None:
        figures.append(Figure(f"p99 delay at {max(1, int(streams))} stream(s)", delay_p99_s, "s"))
    if utilisation is not None:
        figures.append(Figure("server busy share at capacity", utilisation, "share"))
    if streams < 1:
        delay = "" if delay_p99_s is None else f": its p99 delay is {_ms(delay_p99_s)}"
        return Verdict("streams per machine", f"Even one stream misses the {_ms(target_s)} delay target on "
                       f"{where}{delay}.", figures, _rule("streams per machine"),
                       "a faster device, a lighter model or decoder, or a larger chunk with a longer target",
                       weight=1.0)
    count = f"at least {streams:g} streams (the search's limit)" if at_limit else f"{streams:g} stream(s)"
    if span is not None and span[0] != span[1]:
        count += f" ({span[0]:g} to {span[1]:g} over repeated probes)"
    delay = "" if delay_p99_s is None else f" (p99 delay {_ms(delay_p99_s)})"
    return Verdict("streams per machine", f"One process on {where} serves {count} within the {_ms(target_s)} delay "
                   f"target{delay}.", figures, _rule("streams per machine"),
                   "more processes if cores are idle; a larger chunk or a lighter decoder to fit more streams in one",
                   weight=utilisation if utilisation is not None else 0.5)


def fastest_backend(name: str, step_s: Tuple[float, float, float], where: str,
                    runner_up: Optional[Tuple[str, Tuple[float, float, float]]] = None,
                    faster_but_wrong: Sequence[str] = ()) -> Optional[Verdict]:
    """The fastest backend among those that agree with the reference, each step time ``(mean, low, high)``;
    ``None`` when the runner-up's interval overlaps (they are not ordered). ``faster_but_wrong``: backends that
    were faster but disagree (named, never as the fastest).

    Example
    -------
    >>> fastest_backend("a", (1e-3, 0.9e-3, 1.1e-3), "fixed batch 4", ("b", (2e-3, 1.9e-3, 2.1e-3))).sentence
    'a is the fastest backend that agrees with the reference at fixed batch 4: 1.00 ms a step, 2.00x faster than b.'
    """
    figures = [Figure(f"{name} step", step_s[0], "s", step_s[1], step_s[2])]
    if runner_up is None:
        text = f"{name} is the only backend that agrees with the reference at {where}: {_ms(step_s[0])} a step"
        weight = 0.0
    else:
        other, (mean, low, high) = runner_up
        if low <= step_s[2]:
            return None
        figures.append(Figure(f"{other} step", mean, "s", low, high))
        text = (f"{name} is the fastest backend that agrees with the reference at {where}: {_ms(step_s[0])} a step, "
                f"{_num(mean / step_s[0])}x faster than {other}")
        weight = 1 - step_s[0] / mean
    if faster_but_wrong:
        text += f" ({', '.join(faster_but_wrong)} ran faster but disagree{'s' if len(faster_but_wrong) == 1 else ''})"
    return Verdict("fastest backend", text + ".", figures, _rule("fastest backend"),
                   f"train with {name} at these shapes", weight=weight)


def out_of_memory(name: str, size: str, fitted: Sequence[str]) -> Verdict:
    """The backend that runs out of memory first: ``name`` at ``size`` (e.g. ``batch size 8``), where the backends
    ``fitted`` did not.

    Example
    -------
    >>> out_of_memory("a", "batch size 8", ["b"]).sentence
    'a runs out of memory first, at batch size 8 (b fit there).'
    """
    others = f" ({', '.join(fitted)} fit there)" if fitted else ""
    return Verdict("memory", f"{name} runs out of memory first, at {size}{others}.",
                   [Figure("backends out of memory there", 1, ""), Figure("backends that fit there", len(fitted), "")],
                   _rule("memory"), f"a smaller batch or max_frames for {name}, or a backend that fits"
                   + (f" ({fitted[0]})" if fitted else ""), weight=1.0)
