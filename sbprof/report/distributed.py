"""The merged report of a distributed run: stragglers, imbalance, communication and waiting, per rank and host.

Formats a :class:`~sbprof.analysis.distributed.RunSummary` (``sbprof merge``,
rank 0 at the end of a run) or one world of a training scaling study (the
same section, from :mod:`sbprof.report.train`); computes nothing.
"""
from __future__ import annotations

import csv
import io
from typing import Dict, List, Optional

from sbprof.analysis.distributed import RunSummary
from sbprof.report.limits import render_limits
from sbprof.analysis.rank_rows import RankRow
from sbprof.analysis.rank_sections import SectionSummary
from sbprof.analysis.world_scaling import ScalingRow
from sbprof.report.format import MESSAGE_CHARS, bytes_in, plural, sig3, table

REPORT_FILE = "report.md"
CSV_FILE = "ranks.csv"

DEFINITIONS = [
    "step time: wall clock of one profiled step on a rank (median [first, third quartile] over its reported steps);",
    "communication: per step, the union of the spans of its collectives; with DDP it overlaps backward. Under the "
    "decorators, read from the profiler's events (gloo and other CPU backends: from the collective operator's "
    "start, e.g. `c10d::allreduce_`, to the end of its backend event, e.g. `gloo:all_reduce`; NCCL: the NCCL "
    "kernels); under `sbprof run`, whose measured steps run without the profiler, timed by its communication "
    "clock (DDP's communication hook and the `torch.distributed` collectives, from the call to the completion of "
    "its future: host clock on gloo, CUDA events on NCCL);",
    "wait: a step's communication time on a rank minus the smallest over ranks for that step, i.e. time spent "
    "waiting for the others (what a straggler costs them);",
    "busy: step time minus wait (the rank's own work); the slowest rank has the longest median busy time; "
    "imbalance = its median busy time / the median rank's (the lower middle one for an even count), and "
    "+s the difference of the two medians;",
    "straggler cost: the step time saved if the slowest rank ran at the median rank's pace: per step every rank "
    "reported, its busy time minus the longest busy time of the other ranks (0 when it is not the longest), median "
    "over those steps;",
    "between steps: from one step's end (after sbprof wrote its line) to the next one's start (data loading and "
    "the loop's own work), counted only between two steps of the same stage with no other profiled step between "
    "them (a validation step between two training steps is not the training loop's);",
    "data wait (`sbprof run`): time inside the DataLoader's `__next__` before a step; its share is of the loop, "
    "step + time between steps (or + the data wait where no time between steps is known);",
    "machine load: per host, the rank threads (each rank's torch threads) and the cores other work kept busy over "
    "the reported steps (the machine's busy CPU time less every rank's own, over the span); crowded when the "
    "threads outnumber the cores left free: wall-time verdicts are then withheld and the straggler is judged on "
    "CPU time; CPU excess: the most CPU time per step of a rank, median, less the median rank's;",
    "a share is the ratio of the two medians beside it (a section's: median over ranks of each); a figure computed "
    "from fewer ranks than the world names them; steps are counted from 1;",
    "peak memory: the process's resident high-water mark (CPU) or the CUDA allocator's peak;",
    "throughput: utterances (audio seconds) of all ranks over the steps every rank reported, divided by the sum "
    "of those steps' longest time over ranks;",
    "CPU s: the rank process's CPU time during a step, every thread (OpenMP workers, the backend's communication "
    "threads; a thread spinning while it waits counts); CPU cost: a rank's CPU seconds over the audio seconds of "
    "the same steps, i.e. core-seconds per second of audio: what the CPU spends on it, whatever the wait for a "
    "core (n/a when the batches carry no audio length).",
]


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _s(x: Optional[float]) -> str:
    return "n/a" if x is None else sig3(x)


def _short(text: str) -> str:
    """A reason in a table cell: one line, no ``|``, at most :data:`MESSAGE_CHARS` characters."""
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"


def _where(r: RankRow) -> str:
    return f"rank {r.rank} ({r.host or '?'}, node {r.node_rank})"


def _peak(r: Optional[RankRow]) -> str:
    if r is None:
        return "n/a"
    return f"{bytes_in('GB', r.peak_bytes)} GB {r.peak_kind} ({_where(r)})"


def _of_ranks(ranks: List[int], s: SectionSummary) -> str:
    """`` (ranks 0, 2 of 3)`` when a figure comes from fewer ranks than the world, else nothing."""
    if len(ranks) >= s.world_size:
        return ""
    return f" (from {'rank' if len(ranks) == 1 else 'ranks'} {_ranks_text(ranks)} only, of {s.world_size})"


def empty_line(s: SectionSummary) -> str:
    """Why a section has no figures: how many steps each rank took, none of them recorded."""
    taken = sorted({n for _, n, _ in s.empty})
    took = (f"{plural(taken[0], 'step')} taken on each rank" if len(taken) == 1 else
            "; ".join(f"rank {r}: {plural(n, 'step')} taken" for r, n, _ in s.empty)) if s.empty else "no step taken"
    schedule = f" by its schedule, {s.schedule}," if s.schedule else ""
    example = ("sbprof run --warmup 1" if (s.schedule or "").startswith("sbprof run") else
               "profile_optimiser(brain, wait=0, warmup=1, active=3)")
    return (f"0 steps recorded ({took}, none reached the recorded part{schedule} which counts each stage's steps "
            f"on its own): give this stage more batches, or its own shorter schedule (e.g. {example})")


def headline(s: SectionSummary) -> List[List[str]]:
    """The section's figures, one per row; a share is always the ratio of the two medians beside it."""
    rows = [["ranks with figures", f"{len(s.rows)} of {s.world_size}"]]
    if not s.rows:
        rows.append(["steps recorded", empty_line(s)])
        return rows
    comm = (f"{_s(s.comm_s)} s per step (median over ranks), {_pct(s.comm_share)} of the median step time"
            f"{_of_ranks(s.comm_ranks, s)}" if s.comm_s is not None else
            ("n/a (one rank: no peer)" if s.world_size < 2 else "n/a (no communication recorded)"))
    if s.most_waiting is not None:
        waiting = (f"{_where(s.most_waiting)}: {_s(s.most_waiting.wait_s)} s per step waiting for the others "
                   f"(its median; {_pct(s.most_waiting.wait_share)} of its median step time)"
                   f"{_of_ranks(s.wait_ranks, s)}" + ("; estimated: some steps lack another rank's communication, "
                                                      "so its own fastest collective stands for the collective"
                                                      if s.most_waiting.wait_estimated else ""))
    else:
        waiting = ("n/a (one rank: no peer)" if s.world_size < 2 else
                   "n/a (needs every rank's communication for the same steps)")
    cost = s.straggler_cost
    rows += [
        ["step time (wall), median over ranks", f"{_s(s.step_s)} s"],
        ["slowest rank", f"{_where(s.slowest)}: busy {_s(s.slowest.busy.median)} s per step (median)"],
        ["imbalance", f"{s.imbalance:.2f} x the median rank's busy time (+{_s(s.excess_s)} s per step, "
                      "difference of the medians)" if s.imbalance is not None else "n/a (one rank with figures)"],
        ["straggler cost", f"{_s(cost.seconds)} s per step: the step time saved if rank {s.slowest.rank} ran at "
                           f"the median rank's pace (median over {plural(cost.steps, 'step')} every rank reported)"
         if cost is not None else "n/a (needs two ranks with the same steps)"],
        ["communication", comm],
        ["most waiting", waiting],
        ["between steps (data loading, loop)",
         f"{_s(s.between_s)} s (median over ranks), {_pct(s.between_share)} of median step + between"
         f"{_of_ranks(s.between_ranks, s)}" if s.between_s is not None else "n/a"],
        ["peak memory (highest rank)", _peak(s.peak)],
        ["CPU time per step, median over ranks", "n/a (the steps carry no CPU time)" if s.cpu_s is None else
         f"{_s(s.cpu_s)} s; CPU cost {_s(s.cpu_cost)} core-s per audio s" if s.cpu_cost is not None else
         f"{_s(s.cpu_s)} s; CPU cost n/a (the batches carry no audio length)"],
    ]
    if s.cpu_excess is not None:
        rows.append(["CPU excess", f"rank {s.cpu_excess.rank}: {_s(s.cpu_excess.seconds)} s of CPU time per step "
                                   "over the median rank's (medians)"])
    if s.data_wait_s is not None:
        rows.append(["data wait (DataLoader), median over ranks", f"{_s(s.data_wait_s)} s, "
                     f"{_pct(s.data_wait_share)} of the loop (step + between steps){_of_ranks(s.data_wait_ranks, s)}"])
    if s.crowding is not None:
        rows.append(["machine load", s.crowding.describe() + (": CROWDED, wall-time verdicts withheld"
                                                              if s.crowding.crowded else "")])
    t = s.throughput
    if t is not None:
        audio = f", {sig3(t.audio_s_per_s)} audio s/s" if t.audio_s_per_s is not None else ""
        rows.append(["throughput", f"{sig3(t.utterances_per_s)} utterances/s{audio} over {plural(t.steps, 'step')} "
                                   f"(global step {sig3(t.step_s)} s, median)"])
    else:
        rows.append(["throughput", "n/a: these steps carry no utterance counts (a Brain's batches and sbprof train "
                                   "give them)"])
    return rows


def rank_table(rows: List[RankRow]) -> str:
    return table([[str(r.rank), r.host, str(r.node_rank), str(r.steps),
                   f"{sig3(r.step.median)} [{sig3(r.step.q1)}, {sig3(r.step.q3)}]", sig3(r.busy.median), _s(r.comm_s),
                   _pct(r.comm_share), _s(r.wait_s) + (" (est.)" if r.wait_estimated else ""), _s(r.between_s),
                   _s(r.data_wait_s),
                   _s(r.cpu.median if r.cpu is not None else None), _s(r.cpu_cost), bytes_in("GB", r.peak_bytes),
                   _short(r.ended)]
                  for r in rows],
                 ["rank", "host", "node", "steps", "step time s, median [q1, q3]", "busy s", "comm s", "comm share",
                  "wait s", "between s", "data wait s", "CPU s", "CPU cost", "peak GB", "ended"])


def render_section(s: SectionSummary, level: str = "##") -> List[str]:
    """One section: headline figures, per rank, per host."""
    lines = [f"{level} {s.key}", "", table(headline(s), ["figure", "value"])]
    if not s.rows:
        return lines
    more = "" if len(s.shown) == len(s.rows) else (f" (the {len(s.shown) // 2} slowest and fastest by busy time; "
                                                   f"every rank in {CSV_FILE})")
    lines += ["", f"{level}# Per rank{more}", "", "Medians over each rank's reported steps; CPU cost is the "
              "rank's CPU seconds over their audio seconds (see the definitions).", "", rank_table(s.shown),
              "", f"{level}# Per host (node group)", "",
              table([[h.host, str(h.node_rank), _ranks_text(h.ranks), sig3(h.busy_median_s), sig3(h.busy_max_s),
                      _pct(h.comm_share), _s(h.wait_max_s), bytes_in("GB", h.peak_max_bytes)] for h in s.hosts],
                    ["host", "node", "ranks", "busy s, median", "busy s, max", "comm share", "wait s, max",
                     "peak GB, max"])]
    return lines


def _ranks_text(ranks: List[int]) -> str:
    return ", ".join(map(str, ranks)) if len(ranks) <= 8 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"


def status_lines(run: RunSummary) -> List[str]:
    """Whether every rank is there, and which are not (with the step where each was last seen)."""
    if run.complete:
        return [f"**Complete**: all {run.world_size} ranks ended normally."]
    lines = [f"**INCOMPLETE**: {len(run.missing)} rank(s) missing, {len(run.stopped_early)} stopped early; the "
             "others' figures stand."]
    if run.missing:
        lines += ["", "Missing ranks (no figures):", "",
                  table([[str(m.rank), m.host or "?", "never" if m.last_step is None else str(m.last_step + 1),
                          _short(m.why)]
                         for m in run.missing], ["rank", "host", "last step ended (from 1)", "why"])]
    if run.stopped_early:
        lines += ["", "Stopped early (figures up to their last step):", "",
                  table([[str(r.rank), r.host, "?" if r.last_step is None else str(r.last_step + 1), _short(r.ended)]
                         for r in run.stopped_early],
                        ["rank", "host", "last step ended (from 1)", "ended"])]
    return lines


def render_run(run: RunSummary) -> str:
    """The whole merged report of one run."""
    lines = [f"# Distributed run {run.run_id}", "",
             f"{plural(run.world_size, 'rank')}, backend {run.backend}, on {plural(run.hosts, 'host')} / node "
             f"group(s); rank files in `{run.source}`.", ""] + status_lines(run)
    for s in run.sections:
        lines += [""] + render_section(s)
    lines += ["", "## Definitions", ""] + [f"- {d}" for d in DEFINITIONS]
    if run.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in run.notes]
    for name, rows in (run.gpu or {}).items():
        if rows:
            lines += ["", f"## GPU traces (HolisticTraceAnalysis): {name.replace('_', ' ')}", "",
                      table([[str(v) for v in r.values()] for r in rows], list(rows[0]))]
    lines += ["", render_limits(run.limits)]
    return "\n".join(lines) + "\n"


def scaling_lines(title: str, rows: List[ScalingRow]) -> List[str]:
    """A scaling table: throughput, speed-up and efficiency against world size 1, its spread, the machine's load."""
    def load(r: ScalingRow) -> str:
        return "n/a" if r.load is None else f"{r.load:.1f}" + (" BUSY" if r.busy_machine else "")

    def step(r: ScalingRow) -> str:
        return "n/a" if r.step_s is None else f"{sig3(r.step_s)} [{_s(r.step_q1)}, {_s(r.step_q3)}]"

    return [title, "", table([[str(r.world_size), f"{r.processes} / {r.cores}" + (" oversubscribed"
                                                                                 if r.oversubscribed else ""),
                               str(r.runs), _s(r.utterances_per_s), _s(r.audio_s_per_s), step(r),
                               "n/a" if r.speedup is None else f"{r.speedup:.2f}", _pct(r.efficiency),
                               "n/a" if r.imbalance is None else f"{r.imbalance:.2f}", _pct(r.comm_share), load(r)]
                              for r in rows],
                             ["world size", "threads / cores", "runs", "utterances/s", "audio s/s",
                              "global step s, median [q1, q3]", "speed-up", "efficiency", "imbalance", "comm share",
                              "load (1 min)"]),
            "", "Speed-up = throughput / throughput at world size 1; efficiency = speed-up / world size; threads = "
                "ranks x torch threads per rank (oversubscribed: more than the machine's logical cores); global step "
                "= the longest step over ranks, its quartiles over the measured steps (median over runs); load = the "
                "highest 1-minute load average a rank saw at its end (BUSY: at least the machine's cores, so other "
                "work shared them and the figures are slower than an idle machine's). Imbalance and comm share are "
                "n/a for one rank (no peer)."]


def ranks_csv(run: RunSummary) -> str:
    """Every rank's row of every section (the report lists at most the slowest and fastest of a large world)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["section", "rank", "host", "node_rank", "local_rank", "steps", "step_s_median", "step_s_q1",
                     "step_s_q3", "busy_s_median", "comm_s_median", "comm_share", "wait_s_median", "wait_share",
                     "between_s_median", "between_share", "data_wait_s_median", "data_wait_share", "cpu_s_median",
                     "cpu_cost", "peak_bytes", "ended", "last_step"])
    for s in run.sections:
        for r in s.rows:
            writer.writerow([s.key, r.rank, r.host, r.node_rank, r.local_rank, r.steps, r.step.median, r.step.q1,
                             r.step.q3, r.busy.median, r.comm_s, r.comm_share, r.wait_s, r.wait_share, r.between_s,
                             r.between_share, r.data_wait_s, r.data_wait_share,
                             r.cpu.median if r.cpu is not None else None, r.cpu_cost,
                             r.peak_bytes, r.ended, r.last_step])
    return out.getvalue()


def render(run: RunSummary) -> Dict[str, str]:
    """``report.md`` and ``ranks.csv`` of one merged run, by file name (written by :func:`sbprof.jobs.render.write_files`)."""
    return {REPORT_FILE: render_run(run), CSV_FILE: ranks_csv(run)}
