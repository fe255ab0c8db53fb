"""The plan of ``sbprof run``: the script runs here, in the profiling process, and each stage becomes one record.

Unlike the other jobs, nothing is measured in a worker process: the point
is to profile the script as it runs. The one runner still owns the output
folder (lock, ``results.json`` written atomically, the reports rendered from
it, ``--render-only``); the plan's one step runs the script under the hooks
(:mod:`sbprof.script.hooks`) and hands the runner one record per stage.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.jobs.plan import JobPlan, Records, Step, StoreView
from sbprof.jobs.preamble import Preamble
from sbprof.record import Cell, Counts, Measurement, MemoryPeak
from sbprof.record.results import Results
from sbprof.script.launch import Ended, Target

TRACE_DIR = "traces"
NOTHING_SEEN = "no Brain, optimiser step or inference call was seen"


@dataclass
class RunConfig:
    """What ``sbprof run`` was asked: the target and its arguments, steps per stage, stop or go on, trace."""

    preamble: Preamble
    target: Target
    keep_going: bool = False
    trace: bool = True
    rank_folder: Optional[str] = None  # under torchrun: where the ranks' files go (this rank's results go below)

    def rules(self) -> Dict[str, Any]:
        return {"script": self.target.path, "module": self.target.module, "args": list(self.target.args),
                "warmup": self.preamble.warmup, "measured": self.preamble.measured, "continue": self.keep_going,
                "trace": self.trace}


class Plan(JobPlan):
    """One step: run the script, then one record per stage it ran (see the module docstring)."""

    job = "run"
    cfg: RunConfig

    def __init__(self, cfg: RunConfig):
        super().__init__(cfg)
        self.ended: Optional[Ended] = None

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

            ranks = rank_steps(Path(self.cfg.target.argv0).name, Path(self.cfg.rank_folder))
        session = Session(pre.warmup, pre.measured, self.cfg.keep_going, trace_dir, ranks)
        hooks = Hooks(session)

        def close() -> None:
            session.finish()
            hooks.remove()
            if ranks is not None:  # a normal end reads "done" in the merged run; another end, in words
                normal = self.ended is not None and self.ended.exit_code == 0
                ranks.close("done" if normal else f"the script {describe(self.ended)}")

        def recorded() -> Records:
            close()
            return self._records(session)

        def elsewhere() -> Records:
            raise MeasurementError(f"it called os._exit from thread {threading.current_thread().name!r}, and torch's "
                                   "profiler can be stopped only in the thread the script runs in")

        def at_exit(status: int, in_script_thread: bool) -> None:  # os._exit: nothing after it runs, so save now
            self.ended = Ended("os_exit", status)
            view.save_now(recorded if in_script_thread else elsewhere, f"the script {describe(self.ended)}")

        hooks.install()
        try:
            self.ended = run_target(self.cfg.target, StopRun, at_exit=at_exit, in_child=hooks.remove)
        finally:
            close()
        yield self._records(session)

    def _records(self, session: Any) -> Records:
        """One record per stage that recorded a step (``ConfigError`` when the script never took one)."""
        peak = _peak(session) if session.flops else None
        records = [self._record(stage, session, peak) for stage in session.steps.stages
                   if session.steps.stages[stage].wall_s]
        if not records and self.ended.how != "raised":
            raise ConfigError(f"{self.cfg.target.argv0}: {NOTHING_SEEN} in the script (it "
                              f"{describe(self.ended)}); sbprof run profiles speechbrain.core.Brain batches, "
                              "torch.optim optimiser steps and speechbrain.inference calls")
        return Records(records, replace=True, notes=session.notes + [f"the script {describe(self.ended)}"])

    def _record(self, stage: str, session: Any, peak: Optional[Dict[str, Any]]) -> Measurement:
        payload = session.stage_payload(stage)
        warmup = payload["warmup"]
        memory = payload.get("memory") or {}
        params = payload.get("params") or {}
        flops = payload.get("flops") or {}
        cell = Cell(model=self.cfg.target.name, variant=stage, device=payload["device"], threads=_threads())
        return Measurement(
            label=f"{self.cfg.target.name}:{stage}", cell=cell, warmup=warmup, wall_s=payload["wall_s"][warmup:],
            cpu_s=payload["cpu_s"][warmup:],
            memory=MemoryPeak(peak_rss_bytes=memory.get("peak_rss_bytes"),
                              peak_rss_delta_bytes=memory.get("peak_rss_delta_bytes"),
                              rss_method=memory.get("method") if "peak_rss_bytes" in memory else None,
                              peak_cuda_bytes=memory.get("peak_cuda_bytes"),
                              peak_cuda_delta_bytes=memory.get("peak_cuda_delta_bytes"),
                              peak_cuda_reserved_bytes=memory.get("peak_cuda_reserved_bytes")) if memory else None,
            counts=Counts(flops=flops.get("total"), macs=flops.get("macs"), params=params.get("total"),
                          trainable_params=params.get("trainable")),
            settings={"kind": payload["kind"], "ended": describe(self.ended), "exit_code": self.ended.exit_code},
            extra={**{k: v for k, v in payload.items() if k not in ("wall_s", "cpu_s", "device")},
                   "all_wall_s": payload["wall_s"], "all_cpu_s": payload["cpu_s"], "traces": session.traces,
                   "peak_flops": peak},
            env=_env())


def describe(ended: Optional[Ended]) -> str:
    """How the script ended, in words (``finished``, ``was stopped by sbprof after its steps``...)."""
    if ended is None:
        return "did not start"
    return {"finished": "ran to its end", "stopped": "was stopped by sbprof once its steps were recorded",
            "exited": f"exited with status {ended.exit_code}", "interrupted": "was interrupted",
            "raised": f"raised {type(ended.error).__name__}",
            "os_exit": f"left by os._exit({ended.exit_code})"}[ended.how]


def _peak(session: Any) -> Optional[Dict[str, Any]]:
    """The device's peak FLOP/s (a matrix-product probe on the CPU, the datasheet on a GPU), measured after the
    script ended so that the probe cannot disturb it; ``None`` when it cannot be had."""
    import torch

    from sbprof.base.errors import SbprofError
    from sbprof.measuring.flops.peak import gpu_peak, measure_cpu_peak

    device = next(iter(session.devices.values()), "cpu")
    try:
        peak = gpu_peak(device) if device.startswith("cuda") else measure_cpu_peak(num_threads=torch.get_num_threads())
    except SbprofError:
        return None
    return peak.to_dict()


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _env() -> Any:
    from sbprof.measuring.env import collect_env

    return collect_env()

