"""Markdown report of the training recipe: per variant, step time, throughput, memory, FLOPs, parameters,
and where the step's time goes. Reads the records of ``results.json`` only; never measures.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tabulate import tabulate

from sbprof.analysis.train import TrainCell, TrainPayload, TrainRules, TrainSummary
from sbprof.report.counts import si
from sbprof.report.distributed import DEFINITIONS, render_section, scaling_lines, status_lines
from sbprof.report.format import bytes_in, machine_line, sig3
from sbprof.report.limits import render_limits
from sbprof.report.modules_markdown import display_names, render_breakdown

REPORT_FILE = "report.md"


def _memory_text(cell: TrainCell) -> str:
    mem = cell.memory
    if mem is None:
        return "n/a"
    if mem.peak_cuda_bytes is not None:
        return (f"CUDA allocator peak {bytes_in('GB', mem.peak_cuda_bytes)} GB "
                f"(+{bytes_in('GB', mem.peak_cuda_delta_bytes)} GB during the step)")
    return (f"process resident peak {bytes_in('GB', mem.peak_rss_bytes)} GB "
            f"(+{bytes_in('GB', mem.peak_rss_delta_bytes)} GB during the step; {mem.rss_method})")


CPU_DEFINITION = ("CPU time = the worker process's CPU time during a step (all its threads); CPU cost = summed CPU "
                  "time / summed audio seconds trained (core-seconds per audio second): what a core spends, "
                  "independent of waiting for one. With several threads it includes threads that spin while "
                  "waiting (OpenMP). The step time above stays the wall clock a user waits on.")


def _precisions(extra: TrainPayload) -> str:
    """``; MACs: 97.0% bf16, 3.0% fp32``: the share of the products' MACs run in each precision."""
    macs = extra.flops.macs_by_precision if extra.flops is not None else {}
    total = sum(macs.values())
    if not total:
        return ""
    return "; MACs: " + ", ".join(f"{100 * v / total:.1f}% {k}" for k, v in sorted(macs.items(), key=lambda kv: -kv[1]))


def summary_table(cell: TrainCell) -> str:
    """The headline figures of one cell."""
    f, extra = cell.figures, cell.payload
    rows = [
        ["step time, median [q1, q3]", f"{sig3(f.step_s_median)} s [{sig3(f.step_s_q1)}, {sig3(f.step_s_q3)}] "
                                       f"over {f.steps} steps ({cell.warmup} warm-up steps left out)"],
        ["audio trained per second", f"{sig3(f.audio_s_per_s)} s/s ({sig3(cell.audio_s)} s of audio in "
                                     f"{cell.audio_steps} steps)" if f.audio_s_per_s is not None else "n/a"],
        ["peak memory (one step, longest batch)", _memory_text(cell)],
    ]
    if extra.precision is not None:
        rows.insert(0, ["precision", extra.precision if extra.precision == "fp32"
                        else f"{extra.precision} (autocast{', gradient scaler' if extra.precision == 'fp16' else ''})"])
    if extra.loss_per_step:
        losses = extra.loss_per_step
        rows.append(["training loss, first / last step", f"{sig3(losses[0])} / {sig3(losses[-1])} over "
                                                         f"{len(losses)} steps (warm-up included)"])
    if f.cpu_s_median is not None:
        rows.insert(1, ["CPU time per step, median [q1, q3]", f"{sig3(f.cpu_s_median)} s [{sig3(f.cpu_s_q1)}, "
                                                               f"{sig3(f.cpu_s_q3)}]"])
        if f.cpu_cost is not None:
            rows.insert(3, ["CPU cost (core-seconds per audio second)", f"{sig3(f.cpu_cost)} (= core-hours per "
                                                                        "hour of audio trained)"])
    if f.flops_per_step is not None:
        rows += [["FLOPs per step (forward + backward)",
                  f"{si(f.flops_per_step, 'FLOP')} ({si(cell.macs_per_step, 'MAC')}{_precisions(extra)})"
                  if cell.macs_per_step is not None else "n/a"],
                 ["FLOPs per second of audio", si(f.flops_per_audio_s, "FLOP") + " per audio second"],
                 ["achieved (FLOPs per step / step time)", si(f.achieved_flops_per_s, "FLOP/s")]]
    if extra.loadavg_1m is not None:
        cores = "?" if cell.cores is None else cell.cores
        others = cell.other_load
        note = f" (about {others:.1f} more busy with other work: steps shared the CPU)" if others > 0.5 else ""
        rows.append(["machine load (1-min average, after the timed steps)",
                     f"{extra.loadavg_1m:.2f} on {cores} cores{note}"])
    params = extra.params
    if params is not None:
        dtypes = ", ".join(f"{bytes_in('MB', b)} MB {d}" for d, b in params.bytes_by_dtype.items())
        rows.append(["parameters", f"{si(params.total, '')} ({si(params.trainable, '')} trainable; {dtypes})"])
    return tabulate(rows, headers=["figure", "value"], tablefmt="github", disable_numparse=True)


def flops_table(cell: TrainCell) -> Optional[str]:
    """FLOPs per selected module next to its share of the step's time."""
    if not cell.flops:
        return None
    names = display_names([r.label for r in cell.flops], [r.depth for r in cell.flops])
    table = [[name, si(r.forward, "FLOP"), si(r.backward, "FLOP"),
              "n/a" if r.flops_share is None else f"{100 * r.flops_share:.1f}%", f"{100 * r.time_share:.1f}%"]
             for name, r in zip(names, cell.flops)]
    return tabulate(table, headers=["module", "forward", "backward", "share of FLOPs", "share of time"],
                    tablefmt="github", disable_numparse=True)


def params_table(cell: TrainCell) -> Optional[str]:
    """Parameters per submodule (the Brain's modules and the rows of the time table)."""
    rows = [r for r in (cell.payload.params.modules if cell.payload.params is not None else []) if r.total]
    if not rows:
        return None
    names = display_names([r.name for r in rows], [r.depth for r in rows])
    table = [[name, r.type, f"{r.total:,}", f"{r.trainable:,}", "yes" if r.shared else ""]
             for name, r in zip(names, rows)]
    return tabulate(table, headers=["module", "type", "parameters", "trainable", "shared"], tablefmt="github",
                    disable_numparse=True)


def render_variant(cell: TrainCell) -> str:
    """The section of one cell (a variant on a setting, one run)."""
    where, extra = cell.cell, cell.payload
    run = f", run {where.run}" if where.run else ""
    head = (f"## {where.model} ({cell.brain}, {where.device}, {where.threads} threads, "
            f"batch {where.batch_size}{run})")
    if not cell.outcome.ok:
        return f"{head}\n\n{cell.outcome.status}: {cell.outcome.message}\n"
    cpu = ([CPU_DEFINITION, ""] if cell.figures is not None and cell.figures.cpu_s_median is not None else [])
    parts = [head, "", summary_table(cell), "", *cpu, "### Where the step's time goes", "",
             render_breakdown(extra.modules, cell.steps).rstrip()]
    if any(r.type == "RNNTLoss" for r in extra.modules.rows):
        parts += ["", "torchaudio's `rnnt_loss` computes the loss and its gradient in one forward call: its "
                  "forward time holds its backward work, and its backward only scales the stored gradient."]
    table = flops_table(cell)
    if table is not None:
        untracked = extra.flops.untracked if extra.flops is not None else {}
        parts += ["", "### Compute per module (FLOPs per step, mean over the measured steps)", "", table]
        if untracked:
            parts += ["", "Operators without a FLOP formula (not counted, calls over all batches): "
                      + ", ".join(f"`{k}` ({v})" for k, v in untracked.items()) + "."]
    table = params_table(cell)
    if table is not None:
        parts += ["", "### Parameters per submodule", "", table]
    if extra.trace_files:
        parts += ["", "### Trace", "", "Detailed attribution under torch.profiler (open in Perfetto or "
                  "TensorBoard): " + ", ".join(f"`{p}`" for p in extra.trace_files)]
        if extra.modules_detailed is not None:
            parts += ["", render_breakdown(extra.modules_detailed, cell.detailed_steps).rstrip()]
    return "\n".join(parts) + "\n"


def render_train(summary: TrainSummary) -> str:
    """The whole report: the run's rules and machine, then one section per cell.

    Example
    -------
    >>> from sbprof.analysis.train import analyse
    >>> from sbprof.record import Cell, Measurement, Results
    >>> r = Results("train", rules={"seed": 1}, records=[Measurement("train:ctc", Cell(model="ctc"), status="error",
    ...                                                               message="RuntimeError: boom")])
    >>> "error: RuntimeError: boom" in render_train(analyse(r))
    True
    """
    rules = summary.rules
    machine = summary.machine
    lines = ["# Training-loop profile", "",
             f"- **Machine**: {machine_line(machine)}",
             f"- **Batches**: {_rules_text(rules)}",
             "- **Step**: one `Brain.fit_batch` (forward, loss, backward, optimiser step), timed by the "
             f"`sbprof.profile(brain, {'activities=()' if summary.cells else 'activities=[CPU]'})` decorator (wall "
             "clock; CUDA synchronised).", ""]
    for cell in summary.cells:
        lines.append(render_variant(cell))
    lines += distributed_lines(summary)
    lines += [render_limits(summary.limits), ""]
    return "\n".join(lines)


def distributed_lines(summary: TrainSummary) -> List[str]:
    """A ``world_sizes`` study: the scaling tables, then each world merged as ``sbprof merge`` merges it."""
    if not summary.worlds:
        return []
    data = summary.rules.data
    batch = "?" if data is None else data.batch_size
    lines = ["## Distributed training (DDP under torchrun)", "",
             "Each world is one torchrun launch of that many ranks on this machine (gloo on the CPU, NCCL with one "
             "GPU per rank), SpeechBrain's DDP path (`ddp_init_group`, the Brain's DDP wrapping), each step profiled "
             "with operator recording (`profile(brain, activities=[CPU])`) to read its communication.", ""]
    for t in summary.scaling:
        how = (f"global batch of {batch} utterances split over the ranks" if t.scaling == "strong"
               else f"{batch} utterances per rank")
        lines += scaling_lines(f"### Scaling: {t.variant} on {t.device}, {t.threads} thread(s) per rank, {t.scaling} "
                               f"scaling ({how})", t.rows) + [""]
    for w in summary.worlds:
        what = "the baseline of both scalings" if w.world_size == 1 else f"{w.scaling} scaling"
        lines += [f"### World of {w.world_size} ({what}): {w.variant} on {w.device}, run {w.run}", ""]
        if w.launch is not None:
            lines += [f"torchrun: `{w.torchrun}`; rank files `{w.summary.source}` "
                      "(`sbprof merge` on that folder gives the same figures).", ""]
            if not w.launch.ok:
                lines += [f"Launch {w.launch.status}: {w.launch.message}", ""]
        lines += status_lines(w.summary)
        for section in w.summary.sections:
            lines += [""] + render_section(section, level="####")
        lines.append("")
    return lines + ["Definitions:", ""] + [f"- {d}" for d in DEFINITIONS] + [""]


def render(summary: TrainSummary) -> Dict[str, str]:
    """``report.md``, by file name."""
    return {REPORT_FILE: render_train(summary)}


def _rules_text(rules: TrainRules) -> str:
    data = rules.data
    if data is None:
        return "n/a"
    return (f"{data.num_batches} mock-up batches of {data.batch_size} utterances cycled, lengths "
            f"and token counts drawn from LibriSpeech train-clean-100 shapes x {data.scale} "
            f"(white noise at {data.sample_rate} Hz, random tokens), seed {rules.seed}; "
            f"{rules.warmup} warm-up + {rules.measured} measured steps")
