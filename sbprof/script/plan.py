"""The plan of ``sbprof run``: the script runs here, in the profiling process, and each stage becomes one record.

Unlike the other jobs, nothing is measured in a worker process: the point
is to profile the script as it runs. The one runner still owns the output
folder (lock, ``results.json`` written atomically, the reports rendered from
it, ``--render-only``); the plan's one step runs the script under the hooks
(:mod:`sbprof.script.hooks`) and hands the runner one record per stage.
"""
from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

from sbprof.analysis.run import PeakFlops, RunPayload
from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.jobs.plan import JobPlan, Records, Step, StoreView
from sbprof.jobs.preamble import Preamble
from sbprof.record import Cell, Counts, Measurement, MemoryPeak
from sbprof.record.results import Results
from sbprof.script import JOB
from sbprof.script.interrupts import AfterScript
from sbprof.script.launch import Ended, Target

TRACE_DIR = "traces"
DEBUG_CHECKPOINTS = "debug_checkpoints"
"""Under torchrun, beside the ranks' folders: the checkpoints of SpeechBrain's debug mode, one folder for all ranks
(removed at the end)."""
NOTHING_SEEN = "no Brain, optimiser step or inference call was seen"


@dataclass
class RunConfig:
    """What ``sbprof run`` was asked: the target and its arguments, steps per stage, stop or go on, trace."""

    preamble: Preamble
    target: Target
    keep_going: bool = False
    trace: bool = True
    rank_folder: Optional[str] = None  # under torchrun: where the ranks' files go (this rank's results go below)
    verbose: bool = False  # the profiler's own console lines kept
    ddp: Optional[str] = None  # --ddp: the process group's backend sbprof starts (sbprof.script.ddp)
    stages: Optional[Tuple[str, ...]] = None  # --stages: the only stages measured (None: every stage)

    def rules(self) -> Dict[str, Any]:
        return {"script": self.target.path, "module": self.target.module, "args": list(self.target.args),
                "warmup": self.preamble.warmup, "measured": self.preamble.measured, "continue": self.keep_going,
                "trace": self.trace, "ddp": self.ddp, "stages": list(self.stages) if self.stages else None}


class Plan(JobPlan):
    """One step: run the script, then one record per stage it ran (see the module docstring)."""

    job = JOB.name  # the name its Job gives
    cfg: RunConfig

    def __init__(self, cfg: RunConfig):
        super().__init__(cfg)
        self.ended: Optional[Ended] = None
        self.unmeasured: Optional[str] = None  # the one line of a run in which no step could be measured
        self.after_script = AfterScript(log)

    def header(self) -> Results:
        target = self.cfg.target
        return self.results(self.cfg.rules(), {target.name: {"script": target.path, "module": target.module}})

    def expected(self) -> int:
        return 1

    def steps(self, view: StoreView) -> Iterator[Step]:
        from sbprof.script.hooks import Hooks
        from sbprof.script.launch import run_target
        from sbprof.script.session import Session, StopRun

        pre = self.cfg.preamble
        trace_dir = Path(pre.output_folder) / TRACE_DIR if self.cfg.trace else None
        ranks = None
        if self.cfg.rank_folder is not None:
            from sbprof.script.ranks import rank_steps

            ranks = rank_steps(Path(self.cfg.target.argv0).name, Path(self.cfg.rank_folder), pre.warmup, pre.measured)
        session = Session(pre.warmup, pre.measured, self.cfg.keep_going, trace_dir, ranks, log=log,
                          verbose=self.cfg.verbose, stages=self.cfg.stages)
        if ranks is not None:
            session.checkpoints_dir = Path(self.cfg.rank_folder).parent / DEBUG_CHECKPOINTS
        hooks = Hooks(session)
        hooks.install()
        ddp = None
        if self.cfg.ddp is not None:
            from sbprof.script.ddp import Ddp

            # --ddp (sbprof.script.ddp): the process group, before the script; installed after the hooks, so that
            # its Brain patch is the outer one and reads the script's own run_opts.
            ddp = Ddp(self.cfg.ddp).install()
        def close() -> None:
            self.after_script.arm()  # from here on, Ctrl-C leaves results.json and report.md of what was recorded
            try:
                session.finish()
            finally:
                hooks.remove()
                if ranks is not None:  # a normal end reads "done" in the merged run; another end, in words
                    normal = self.ended is not None and self.ended.exit_code == 0
                    ranks.close("done" if normal else f"the script {describe(self.ended)}")
                    if os.environ.get("RANK") == "0":  # every rank passed the end barrier: the folder is free
                        shutil.rmtree(session.checkpoints_dir, ignore_errors=True)
                if ddp is not None:
                    ddp.remove()

        def recorded() -> Records:
            close()
            return self._records(session)

        def elsewhere() -> Records:
            raise MeasurementError(f"it called os._exit from thread {threading.current_thread().name!r}, and torch's "
                                   "profiler can be stopped only in the thread the script runs in")

        def at_exit(status: int, in_script_thread: bool) -> None:  # os._exit: nothing after it runs, so save now
            self.ended = Ended("os_exit", status)
            view.save_now(recorded if in_script_thread else elsewhere, f"the script {describe(self.ended)}")

        # What sbprof made so far (its imports, this plan) is old before the script's first line: young objects
        # are scanned at every garbage collection until promoted, and a step of thousands of tiny operators
        # (3,000 tensors: several collections a step) paid for them at every collection.
        gc.collect()
        try:
            self.ended = run_target(self.cfg.target, StopRun, at_exit=at_exit, in_child=hooks.remove)
        finally:
            close()
        try:
            yield self._records(session)
        finally:
            if not self.after_script.held:
                self.after_script.restore()

    def _records(self, session: Any) -> Records:
        """One record per stage that recorded a step (``ConfigError`` when the script never took one), after the
        dispatch floor and the peak are measured."""
        if session.operators:
            from sbprof.script.dispatch import dispatch_floor

            session.dispatch_floor_s = dispatch_floor()
        peak = self._peak(session) if session.flops else None
        records = [self._record(stage, session, peak) for stage in session.steps.stages
                   if session.steps.stages[stage].roles]
        if not records and self.ended.how != "raised" and self.cfg.stages and session.steps.stages:
            from sbprof.base.checks import nearest

            seen = list(session.steps.stages)
            raise ConfigError(f"--stages {','.join(self.cfg.stages)}: no step of {' or '.join(self.cfg.stages)} was "
                              f"seen{nearest(self.cfg.stages[0], seen)}; the script's stages: {', '.join(seen)}")
        if not records and self.ended.how != "raised":
            raise ConfigError(f"{self.cfg.target.argv0}: {NOTHING_SEEN} in the script (it "
                              f"{describe(self.ended)}); sbprof run profiles speechbrain.core.Brain batches, "
                              "torch.optim optimiser steps and speechbrain.inference calls")
        self.unmeasured = unmeasured(session, self.cfg.preamble.warmup)
        log(f"analysing {len(records)} stage(s): results.json, then report.md")
        return Records(records, replace=True, notes=session.notes + [f"the script {describe(self.ended)}"])

    def _peak(self, session: Any) -> Optional[Dict[str, Any]]:
        """The device's peak FLOP/s at the precision that did most of the counted MACs (a matrix-product probe on
        the CPU, once per machine, kept in the user's cache; the datasheet on a GPU), after the script ended so
        that the probe cannot disturb it; ``None`` when it cannot be had or was interrupted (noted)."""
        import torch

        from sbprof.base.errors import SbprofError
        from sbprof.measuring.flops.peak import cached_cpu_peak, dominant_precision, gpu_peak

        device = next(iter(session.devices.values()), "cpu")
        macs: Dict[str, float] = {}
        for counted in session.flops.values():
            for precision, value in (counted.get("macs_by_precision") or {}).items():
                macs[precision] = macs.get(precision, 0) + value
        precision = dominant_precision(macs) or "fp32"
        try:
            with self.after_script.interruptible():
                if device.startswith("cuda"):  # a GPU the datasheet table lacks: its reason, in the report's row
                    try:
                        peak = gpu_peak(device, precision)
                    except SbprofError as exc:
                        return {"flops_per_s": None, "precision": precision, "source": str(exc)}
                else:  # no TF32 on a CPU; another dtype (float64...) is probed as fp32, said in the peak's precision
                    peak = cached_cpu_peak(torch.get_num_threads(), log,
                                           precision=precision if precision in ("bf16", "fp16") else "fp32")
        except SbprofError as exc:
            session.notes.append(f"the device's peak FLOP/s is not known ({exc}): no share of the peak")
            return None
        except KeyboardInterrupt:
            session.notes.append("the peak FLOP/s probe was interrupted: no share of the peak")
            return None
        return peak.to_dict()

    def _record(self, stage: str, session: Any, peak: Optional[Dict[str, Any]]) -> Measurement:
        payload = session.stage_payload(stage)
        warmup = payload["warmup"]
        measured = [i for i, role in enumerate(payload["roles"]) if role == "measured"]
        memory = payload.get("memory") or {}
        params = payload.get("params") or {}
        flops = payload.get("flops") or {}
        cell = Cell(model=self.cfg.target.name, variant=stage, device=payload["device"], threads=_threads())
        return Measurement(
            label=f"{self.cfg.target.name}:{stage}", cell=cell, warmup=warmup,
            wall_s=[payload["wall_s"][i] for i in measured], cpu_s=[payload["cpu_s"][i] for i in measured],
            memory=MemoryPeak(peak_rss_bytes=memory.get("peak_rss_bytes"),
                              peak_rss_delta_bytes=memory.get("peak_rss_delta_bytes"),
                              rss_method=memory.get("method") if "peak_rss_bytes" in memory else None,
                              peak_cuda_bytes=memory.get("peak_cuda_bytes"),
                              peak_cuda_delta_bytes=memory.get("peak_cuda_delta_bytes"),
                              peak_cuda_reserved_bytes=memory.get("peak_cuda_reserved_bytes")) if memory else None,
            counts=Counts(flops=flops.get("total"), macs=flops.get("macs"), params=params.get("total"),
                          trainable_params=params.get("trainable")),
            settings={"kind": payload["kind"], "ended": describe(self.ended), "exit_code": self.ended.exit_code},
            # The session's stage payload as sent (RunPayload's keys: a key it does not declare is refused when
            # the file is read), every step's times beside the measured ones, and the device's peak.
            extra={**{k: v for k, v in payload.items() if k not in ("wall_s", "cpu_s", "device")},
                   **RunPayload(all_wall_s=payload["wall_s"], all_cpu_s=payload["cpu_s"],
                                peak_flops=None if peak is None else PeakFlops.from_dict(peak)).to_dict()},
            env=_env())


def log(line: str) -> None:
    """A progress line on standard error (standard output is the script's)."""
    print(f"sbprof: {line}", file=sys.stderr, flush=True)


def unmeasured(session: Any, warmup: int) -> Optional[str]:
    """The one line of a run in which no stage has a measured step (naming each stage, its steps and the way out),
    or ``None``."""
    stages = session.steps.stages
    if not stages or any("measured" in record.roles for record in stages.values()):
        return None
    ran = "; ".join(f"stage {stage} ran {record.seen} step{'s' * (record.seen != 1)} ({', '.join(record.roles)})"
                    for stage, record in stages.items())
    return (f"no step could be measured: {ran}. The step that counts FLOPs is never measured: run the script with "
            f"more batches, or with --warmup {max(0, warmup - 1)}")


def describe(ended: Optional[Ended]) -> str:
    """How the script ended, in words (``finished``, ``was stopped by sbprof after its steps``...)."""
    if ended is None:
        return "did not start"
    return {"finished": "ran to its end", "stopped": "was stopped by sbprof once its steps were recorded",
            "exited": f"exited with status {ended.exit_code}", "interrupted": "was interrupted",
            "raised": f"raised {type(ended.error).__name__}",
            "os_exit": f"left by os._exit({ended.exit_code})"}[ended.how]


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _env() -> Any:
    from sbprof.measuring.env import collect_env

    return collect_env()

