"""What one ``sbprof run`` measures around the steps that :mod:`sbprof.script.hooks` finds.

For each stage (``train``, ``valid``, ``test``, an inference method's name):

- step clocks, data wait and the forward/backward/optimiser split
  (:class:`~sbprof.script.steps.Steps`);
- per-module time: a light :class:`~sbprof.measuring.modules.ModuleAttribution` over the
  stage's model (a Brain's ``modules``, an interface's ``mods``, or the modules
  a plain loop's optimiser updates), one attribution step per step;
- FLOPs of the last warm-up step (:class:`~sbprof.measuring.flops.FlopCounter`; the
  counter slows the step it watches, which is why it is a warm-up one);
- peak memory over the measured steps (:class:`~sbprof.measuring.memory.CpuPeak`, or
  :class:`~sbprof.measuring.memory.CudaPeak` on a GPU) and a torch.profiler trace of them,
  each measured step marked in it (:data:`STEP_MARK`), from which the operators per
  step are counted (:mod:`sbprof.script.dispatch`), beside the dispatch floor measured
  once under the same profiler, outside the steps;
- parameter counts of the model (:func:`~sbprof.measuring.params.count_params`).

Nothing here runs an extra step: everything is read from the script's own steps.
"""
from __future__ import annotations

import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set

import torch

from sbprof.script.dispatch import STEP_MARK, dispatch_floor, operators_per_step
from sbprof.script.steps import Steps


class StopRun(BaseException):
    """Raised at a step boundary once the stage has its steps (not an ``Exception``: scripts do not catch it)."""


class Session:
    """The measuring state of one run (see the module docstring).

    Arguments
    ---------
    warmup, measured : int
        Steps per stage.
    keep_going : bool
        ``--continue``: past the recorded steps, nothing stops the script.
    trace_dir : Path, optional
        Where the trace of the measured steps goes (``None``: no trace).
    ranks : sbprof.script.ranks.RankSteps, optional
        Under torchrun: where each measured step also goes (this rank's file).
    """

    def __init__(self, warmup: int, measured: int, keep_going: bool, trace_dir: Optional[Path], ranks: Any = None):
        self.steps = Steps(warmup, measured)
        self.ranks = ranks  # under torchrun, this rank's section (sbprof.script.ranks.RankSteps)
        self.keep_going = keep_going
        self.trace_dir = trace_dir
        self.found: Dict[str, str] = {}  # stage -> what made its steps (brain, loop, inference)
        self.devices: Dict[str, str] = {}
        self.attributions: Dict[int, Any] = {}  # id(root) -> attribution
        self.stage_attribution: Dict[str, Any] = {}  # stage -> (attribution, steps of the stage before it)
        self.flops: Dict[str, Dict[str, Any]] = {}
        self.memory: Dict[str, Dict[str, Any]] = {}
        self.params: Dict[str, Dict[str, Any]] = {}
        self.traces: List[str] = []
        self.notes: List[str] = []
        self._open: Dict[str, Any] = {}
        self._peaks: Dict[str, Any] = {}
        self._tracing: Set[str] = set()
        self._profiler: Any = None
        self.operators: Dict[str, float] = {}  # stage -> top-level operators per measured step (traced stages)
        self.dispatch_floor_s: Optional[float] = None

    # ------------------------------------------------------------ steps

    def should_stop(self, stage: str) -> bool:
        """Whether a new step of ``stage`` is past the recorded ones and the script is to stop there."""
        return not self.keep_going and stage in self.steps.stages and not self.steps.recording(stage)

    def begin(self, stage: str, kind: str, root: Optional[torch.nn.Module], device: str,
              optimizers: Callable[[], List[Any]] = list) -> None:
        """A step of ``stage`` starts (``root``: the model it runs, for modules, FLOPs and parameters)."""
        if self.should_stop(stage):
            raise StopRun(stage)
        index = self.steps.stages[stage].seen if stage in self.steps.stages else 0
        if index >= self.steps.warmup + self.steps.measured:
            self.steps.begin(stage, kind)  # counted only
            return
        if kind != "loop" or stage not in self.found:  # a hooked call names the stage over a stray model call
            self.found[stage] = kind
        self.devices.setdefault(stage, device)
        # Everything sbprof starts for the step comes before its clocks start, so it is not in its time.
        if index == self.steps.warmup:
            self._start_measured(stage, device)
        if root is not None:
            if stage not in self.params:
                from sbprof.measuring.params import count_params

                self.params[stage] = count_params(root).to_dict()
            if index == self.steps.warmup - 1 and stage not in self.flops:
                self._start_flops(root)
            self._begin_modules(stage, root, index, optimizers)
        if stage in self._tracing and self._profiler is not None:
            mark = torch.profiler.record_function(f"{STEP_MARK}{stage}")
            mark.__enter__()
            self._open["mark"] = mark
        self.steps.begin(stage, kind)

    def end(self, ok: bool = True) -> None:
        """The open step ends (``ok=False``: it raised, and is not a step)."""
        step = self.steps.current
        if step is None:
            return
        if ok:
            start, wall, cpu = self.steps.end()
            if self.ranks is not None and self.steps.stages[step.stage].seen > self.steps.warmup:
                self.ranks.step(step.stage, start, wall, cpu)
        else:
            self.steps.discard()
        mark = self._open.pop("mark", None)
        if mark is not None:
            mark.__exit__(None, None, None)
        module_step = self._open.pop("module_step", None)
        if module_step is not None:
            module_step.__exit__(None, None, None)
        counter = self._open.pop("flops", None)
        if counter is not None:
            counter.__exit__(None, None, None)
            self._open.pop("quiet").__exit__(None, None, None)
            if ok:
                self.flops[step.stage] = _flops_of(counter)
        if ok and not self.steps.recording(step.stage):
            self._end_measured(step.stage)
            chosen = self.stage_attribution.get(step.stage)
            if chosen is not None:  # its hooks go; a later stage of the same model enters it again
                chosen[0].close()

    # ------------------------------------------------------------ parts

    def _begin_modules(self, stage: str, root: torch.nn.Module, index: int, optimizers: Callable) -> None:
        from sbprof.measuring.modules import ModuleAttribution

        attribution = self.attributions.get(id(root))
        if attribution is None:
            try:
                attribution = ModuleAttribution(root, "default", mode="light", optimizers=optimizers)
            except Exception as exc:  # a model the attribution cannot select from: times without modules
                self.notes.append(f"per-module time of {stage} not measured: {exc}")
                self.attributions[id(root)] = False
                return
            self.attributions[id(root)] = attribution
        if attribution is False:
            return
        self.stage_attribution.setdefault(stage, (attribution, index))
        if not attribution.active:
            attribution.__enter__()
        module_step = attribution.step(stage)
        module_step.__enter__()
        self._open["module_step"] = module_step

    def _start_flops(self, root: torch.nn.Module) -> None:
        from sbprof.measuring.flops import FlopCounter
        from sbprof.measuring.flops.counter import UntrackedOperatorWarning

        quiet = warnings.catch_warnings()  # operators without a formula are listed in the result instead
        quiet.__enter__()
        warnings.simplefilter("ignore", UntrackedOperatorWarning)
        self._open["quiet"] = quiet
        self._open["flops"] = FlopCounter(root).__enter__()

    def _start_measured(self, stage: str, device: str) -> None:
        from sbprof.measuring.memory import CpuPeak, CudaPeak

        peak = CudaPeak(device) if device.startswith("cuda") else CpuPeak()
        peak.start()
        self._peaks[stage] = peak
        if self.trace_dir is None:
            return
        if self._profiler is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device.startswith("cuda"):
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._profiler = torch.profiler.profile(activities=activities)
                self._profiler.start()
            if self.dispatch_floor_s is None:  # under the profiler, as the steps are: the same cost per operator
                self.dispatch_floor_s = dispatch_floor()
        self._tracing.add(stage)

    def _end_measured(self, stage: str) -> None:
        peak = self._peaks.pop(stage, None)
        if peak is not None:
            values = peak.stop()
            if len(values) == 2:
                self.memory[stage] = {"peak_rss_bytes": values[0], "peak_rss_delta_bytes": values[1],
                                      "method": peak.method}
            else:
                self.memory[stage] = {"peak_cuda_bytes": values[0], "peak_cuda_delta_bytes": values[1],
                                      "peak_cuda_reserved_bytes": values[2], "method": "cuda_allocator"}
        self._tracing.discard(stage)
        if self._profiler is not None and not self._tracing:
            self._stop_trace(stage)

    def _stop_trace(self, name: str) -> None:
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        try:
            self.operators.update(operators_per_step(profiler.events()))
        except Exception as exc:  # a profiler whose events cannot be read: no operator count, the trace still goes
            self.notes.append(f"operators per step not counted: {exc}")
        path = self.trace_dir / f"{name}.pt.trace.json"
        try:
            self.trace_dir.mkdir(parents=True, exist_ok=True)
            profiler.export_chrome_trace(str(path))
        except OSError as exc:
            self.notes.append(f"the trace of {name} was not written: {exc.strerror or exc}")
            return
        if path.is_file():
            self.traces.append(str(path))
        else:  # torch says a failed write (a full disk) only in its own log, and leaves its temporary file
            Path(f"{path}.tmp").unlink(missing_ok=True)
            self.notes.append(f"the trace of {name} was not written in {self.trace_dir} (is its disk full?)")

    def finish(self) -> None:
        """The script ended (or stopped): close what is open; steps left unfinished are not steps."""
        if self.steps.current is not None:
            self.end(ok=False)
        for stage in list(self._peaks):
            self._end_measured(stage)
        if self._profiler is not None:
            self._stop_trace("partial")
        for attribution in self.attributions.values():
            if attribution:
                attribution.close()

    # ------------------------------------------------------------ results

    def stage_payload(self, stage: str) -> Dict[str, Any]:
        """Everything recorded for ``stage`` as plain data (warm-up steps included, flagged by ``warmup``)."""
        record = self.steps.stages[stage]
        payload: Dict[str, Any] = {**asdict(record), "warmup": min(self.steps.warmup, len(record.wall_s)),
                                   "device": self.devices.get(stage, "cpu"), "memory": self.memory.get(stage),
                                   "flops": self.flops.get(stage), "params": self.params.get(stage)}
        if stage in self.operators:
            payload.update(operators_per_step=self.operators[stage], dispatch_floor_s=self.dispatch_floor_s)
        chosen = self.stage_attribution.get(stage)
        if chosen is not None:
            attribution, before = chosen
            skip = max(0, self.steps.warmup - before)
            try:
                payload["modules"] = attribution.breakdown(stage, skip_first=skip).to_dict()
            except Exception as exc:  # e.g. every step was a warm-up one
                payload["modules_error"] = str(exc)
        return payload


def _flops_of(counter: Any) -> Dict[str, Any]:
    result = counter.result()
    backward = result.backward_flops or 0
    return {"forward": result.flops, "backward": result.backward_flops, "total": result.flops + backward,
            "macs": result.macs + (result.backward_macs or 0), "untracked": dict(result.untracked)}
