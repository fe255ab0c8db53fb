"""What one ``sbprof run`` measures around the steps that :mod:`sbprof.script.hooks` finds.

Each stage (``train``, ``valid``, ``test``, an inference method's name) lives
by its plan (:mod:`sbprof.script.lifecycle`): every step has one role, and each
figure comes from the steps of its role only:

- ``measured`` steps, untouched by any profiler or per-module hook: step and CPU
  time, data wait, time between, the forward/backward/optimiser split
  (:class:`~sbprof.script.steps.Steps`; under torchrun also the rank's file);
- the ``flops`` step (the last warm-up one): FLOPs and operators per step
  (:class:`~sbprof.measuring.flops.FlopCounter`);
- the ``memory`` step: peak and added memory (:class:`~sbprof.measuring.memory.CpuPeak`
  after a heap trim, or :class:`~sbprof.measuring.memory.CudaPeak`), from its own start;
- ``modules`` steps: per-module time (a light :class:`~sbprof.measuring.modules.ModuleAttribution`
  over the stage's model: a Brain's ``modules``, an interface's ``mods``, or the
  modules a plain loop's optimiser updates);
- ``traced`` steps: the trace (:class:`~sbprof.script.trace.Tracer`, bounded);
- parameter counts of the model (:func:`~sbprof.measuring.params.count_params`).

Nothing here runs an extra step: every role is one of the script's own steps.
A figure without its step says why (:meth:`Session.why`). sbprof's own work
between steps is noted in the clocks (not the loop's time).
"""
from __future__ import annotations

import threading
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from sbprof.script.lifecycle import FIGURE_ROLES, StagePlan, relabelled, stage_plan
from sbprof.script.steps import LOOP_CPU_FIELDS, Steps
from sbprof.script.trace import Tracer


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
        Where the traces go (``None``: no trace).
    ranks : sbprof.script.ranks.RankSteps, optional
        Under torchrun: where each measured step also goes (this rank's file).
    log : callable, optional
        Receives a progress line before each pause sbprof makes in the script (exporting a trace).
    verbose : bool
        Keep the profiler's own console lines.
    stages : tuple of str, optional
        ``--stages``: the only stages measured; another stage's steps are counted, not recorded, and the script
        stops at the first step after these have their steps (unless ``keep_going``).
    """

    def __init__(self, warmup: int, measured: int, keep_going: bool, trace_dir: Optional[Path], ranks: Any = None,
                 log: Optional[Callable[[str], None]] = None, verbose: bool = False,
                 stages: Optional[Tuple[str, ...]] = None):
        self.warmup, self.measured = warmup, measured
        self.steps = Steps()
        self.ranks = ranks
        self.keep_going = keep_going
        self.stages = stages
        self.log = log or (lambda line: None)
        self.tracer = Tracer(trace_dir, self.log, verbose) if trace_dir is not None else None
        self.thread = threading.get_ident()  # the script's thread: the only one StopRun may be raised in
        self.plans: Dict[str, StagePlan] = {}
        self.limits: Dict[str, int] = {}  # stage -> batches it will have (a test stage: one pass)
        self.found: Dict[str, str] = {}  # stage -> what made its steps (brain, loop, inference)
        self.devices: Dict[str, str] = {}
        self.brains: Dict[str, Dict[str, Any]] = {}  # stage -> the Brain's class and number
        self.attributions: Dict[int, Any] = {}  # id(model) -> attribution (False: none possible)
        self.stage_attribution: Dict[str, Any] = {}
        self.flops: Dict[str, Dict[str, Any]] = {}
        self.operators: Dict[str, int] = {}  # stage -> operators dispatched in its FLOP step
        self.memory: Dict[str, Dict[str, Any]] = {}
        self.params: Dict[str, Dict[str, Any]] = {}
        self.errors: Dict[str, Dict[str, str]] = {}  # stage -> figure role -> why its step gave nothing
        self.stage_notes: Dict[str, List[str]] = {}
        self.notes: List[str] = []
        self.dispatch_floor_s: Optional[float] = None
        self.checkpoints = 0  # module calls (global hooks), backward and optimiser steps so far
        self.checkpoints_dir: Optional[Path] = None  # under torchrun: the Brains' debug-mode checkpoints, shared
        self.setup_s = 0.0  # sbprof's own work right before the open step's clocks started
        self._open: Dict[str, Any] = {}
        # Imported now, before the script, not at a stage's first step of each role: objects made between two
        # measured steps are young ones every garbage collection of those steps scans.
        import sbprof.measuring.flops  # noqa: F401
        import sbprof.measuring.memory  # noqa: F401
        import sbprof.measuring.modules  # noqa: F401
        import sbprof.measuring.params  # noqa: F401

    # ------------------------------------------------------------ plans

    def plan(self, stage: str) -> StagePlan:
        """The stage's plan, fixed at its first step."""
        plan = self.plans.get(stage)
        if plan is None and not self.wanted(stage):
            plan = self.plans[stage] = StagePlan(0, 0, memory=0, modules=0, traced=0)  # counted, never recorded
        elif plan is None:
            plan = self.plans[stage] = stage_plan(self.warmup, self.measured, self.limits.get(stage),
                                                  self.tracer is not None)
            if plan.shrunk:
                self.stage_notes.setdefault(stage, []).append(plan.shrunk)
        return plan

    def limit(self, stage: str, batches: Optional[int]) -> None:
        """``stage`` will have ``batches`` steps in all (said before its first step)."""
        if batches and stage not in self.plans:
            self.limits[stage] = batches

    def next_role(self, stage: str) -> Optional[str]:
        """The role of ``stage``'s next step (``None``: past its plan)."""
        return self.plan(stage).role(self.steps.seen(stage))

    def recording(self, stage: str) -> bool:
        return self.next_role(stage) is not None

    def wanted(self, stage: str) -> bool:
        """Whether ``stage`` is measured (``--stages``)."""
        return self.stages is None or stage in self.stages

    def should_stop(self, stage: str, kind: str) -> bool:
        """Whether a new step of ``stage`` is past its plan and the script is to stop there: a loop's or an
        interface's stage (a Brain's debug mode bounds its own), or any stage once ``--stages``' stages have their
        steps; in the script's thread only."""
        if self.keep_going or threading.get_ident() != self.thread:
            return False
        if self.stages is not None:  # only the asked stages' plans decide (another's plan is empty)
            return all(s in self.steps.stages and not self.recording(s) for s in self.stages)
        return kind != "brain" and stage in self.steps.stages and not self.recording(stage)

    def checkpoint(self) -> None:
        """A module call, backward or optimiser step: the tracer's chance to stop collecting at its cap."""
        self.checkpoints += 1
        if self.tracer is not None and self.tracer.recording:
            self.tracer.checkpoint()

    # ------------------------------------------------------------ steps

    def begin(self, stage: str, kind: str, root: Optional[torch.nn.Module], device: str,
              optimizers: Callable[[], List[Any]] = list) -> Optional[str]:
        """A step of ``stage`` starts (``root``: the model it runs); its role, set up before its clocks start."""
        if self.should_stop(stage, kind):
            raise StopRun(stage)
        started, cpu0 = time.perf_counter(), time.process_time()
        stray = self.steps.current
        if stray is not None and stray.kind == "loop" and kind != "loop":
            # A model call with gradients outside the Brain's (or interface's) own calls opened a loop step that
            # no optimiser step ended: it was never a step, and gives its index back.
            self.steps.discard(unseen=True)
            self._close(stray.stage, stray.role, False, None)
        index = self.steps.seen(stage)
        role = self.plan(stage).role(index)
        if role is not None:
            if kind != "loop" or stage not in self.found:  # a hooked call names the stage over a stray model call
                self.found[stage] = kind
            self.devices.setdefault(stage, device)
            if root is not None and stage not in self.params:
                from sbprof.measuring.params import count_params

                self.params[stage] = count_params(root).to_dict()
            role = self._prepare(stage, role, index, root, device, optimizers)
        peak = self._open.get("peak")
        if peak is not None:
            peak.start()  # the last thing before the clocks: the heap trimmed, the mark reset
        now = time.perf_counter()
        self.setup_s = now - started
        self.steps.add_own(started, now, time.process_time() - cpu0)
        if role is None and self.ranks is not None:  # still a step: the next one of another stage has no time between
            self.ranks.counted(stage)
        self.steps.begin(stage, kind, role)
        return role

    def _prepare(self, stage: str, role: str, index: int, root: Optional[torch.nn.Module], device: str,
                 optimizers: Callable) -> str:
        self._open["index"] = index
        if role == "flops":
            from sbprof.measuring.flops import FlopCounter
            from sbprof.measuring.flops.counter import UntrackedOperatorWarning

            quiet = warnings.catch_warnings()  # operators without a formula are listed in the result instead
            quiet.__enter__()
            warnings.simplefilter("ignore", UntrackedOperatorWarning)
            try:
                counter = FlopCounter(root).__enter__()
            except Exception as exc:  # e.g. a dispatch mode of the script's own: the step runs uncounted
                quiet.__exit__(None, None, None)
                self.errors.setdefault(stage, {})["flops"] = f"the FLOP counter did not start ({exc})"
                return "warmup" if index < self.plan(stage).warmup else "spare"
            self._open.update(quiet=quiet, checkpoints=self.checkpoints, flops=counter, compiled=_compiled(root))
        elif role == "memory":
            from sbprof.measuring.memory import CpuPeak, CudaPeak

            # The recent garbage only: a full collection of a recipe's million objects took up to 0.9 s a stage.
            self._open["peak"] = CudaPeak(device) if device.startswith("cuda") else CpuPeak(gc_generation=1)
        elif role == "modules":
            module_step = self._module_step(stage, root, optimizers)
            if module_step is None:
                return "spare"
            self._open["module_step"] = module_step
        elif role == "traced" and not self.tracer.begin_step(stage, index, device):
            return "spare"  # the stage's trace is cut, or could not be bounded
        return role

    def end(self, ok: bool = True) -> None:
        """The open step ends (``ok=False``: it raised, and is not a step)."""
        step = self.steps.current
        if step is None:
            return
        timing = self.steps.end() if ok else self.steps.discard()
        started, cpu0 = time.perf_counter(), time.process_time()
        try:
            self._close(step.stage, step.role, ok, timing)
        finally:
            self.steps.add_own(started, time.perf_counter(), time.process_time() - cpu0)
        if ok and timing is not None and self.ranks is not None:
            # Under torchrun every step goes to the rank file (the measured ones reported), last: sbprof's own work
            # around the step (here and before its clocks started) is not the loop's time between steps.
            self.ranks.step(step.stage, *timing, step.role == "measured", step.wait_s, step.utterances, step.audio_s,
                            self.setup_s)

    def _close(self, stage: str, role: str, ok: bool, timing: Any) -> None:
        index = self._open.pop("index", None)
        last = index is not None and index == self.plan(stage).last.get(role)
        if role == "flops":
            counter = self._open.pop("flops")
            counter.__exit__(None, None, None)
            self._open.pop("quiet").__exit__(None, None, None)
            checkpoints = self.checkpoints - self._open.pop("checkpoints")
            compiled, record = self._open.pop("compiled"), self.steps.stages[stage]
            if ok and compiled and not counter.result().backward_flops and record.backward_s[-1]:
                # The counter opened inside the model's compiled call (its pre-hook): the backward compiled with it
                # runs kernels a dispatch mode opened there never sees (a compiled MLP read 34 % of its FLOPs).
                self.errors.setdefault(stage, {})["flops"] = ("a compiled module's backward ran unseen by the FLOP "
                                                              "counter (only its forward was counted): no FLOPs")
            elif ok:
                self.flops[stage] = _flops_of(counter)
                self.operators[stage] = counter.operators
                if self.tracer is not None:
                    self.tracer.expect(stage, counter.operators, checkpoints)
        elif role == "memory":
            peak = self._open.pop("peak")
            values = peak.stop()
            if ok:
                self.memory[stage] = _memory_of(values, peak)
        elif role == "modules":
            self._open.pop("module_step").__exit__(None, None, None)
            if last:  # its hooks go; a later stage of the same model enters it again
                self.stage_attribution[stage][0].close()
        elif role == "traced":
            cut = self.tracer.end_step(stage, last)
            if cut and ok:
                self.steps.stages[stage].roles[-1] = "traced_cut"

    def _module_step(self, stage: str, root: Optional[torch.nn.Module], optimizers: Callable) -> Any:
        from sbprof.measuring.modules import ModuleAttribution

        if root is None:
            self.errors.setdefault(stage, {})["modules"] = "no model was known when its steps ran"
            return None
        attribution = self.attributions.get(id(root))
        if attribution is None:
            model = root
            if next(root.children(), None) is None:  # one bare module: it is its own row
                model = torch.nn.ModuleDict({type(root).__name__: root})
            try:
                attribution = ModuleAttribution(model, "default", mode="light", optimizers=optimizers)
            except Exception as exc:  # a model the attribution cannot select from: no per-module time
                attribution = False
                self.errors.setdefault(stage, {})["modules"] = str(exc)
            self.attributions[id(root)] = attribution
        if attribution is False:
            self.errors.setdefault(stage, {}).setdefault("modules", "the attribution could not select its modules")
            return None
        self.stage_attribution.setdefault(stage, (attribution,))
        if not attribution.active:
            attribution.__enter__()
        module_step = attribution.step(stage)
        module_step.__enter__()
        return module_step

    def finish(self) -> None:
        """The script ended (or stopped): close what is open; a step left unfinished is not a step; a stage that
        ended before its measured steps has its last plain warm-up step measured."""
        if self.steps.current is not None:
            self.end(ok=False)
        for key in ("flops", "quiet", "module_step"):
            opened = self._open.pop(key, None)
            if opened is not None:
                opened.__exit__(None, None, None)
        self._open.clear()
        if self.tracer is not None:
            try:
                self.tracer.stop()
            except Exception as exc:  # an interrupted profiler: the figures stand without its trace
                self.notes.append(f"the last trace could not be written: {exc}")
            self.notes += self.tracer.notes
        for attribution in self.attributions.values():
            if attribution:
                attribution.close()
        for stage, record in self.steps.stages.items():
            roles = relabelled(record.roles)
            if roles is not None:
                self.steps.relabel(stage, roles)
                warmup = roles.index("measured")
                self.stage_notes.setdefault(stage, []).append(
                    f"only {len(roles)} step{'s' * (len(roles) != 1)} ran, fewer than --warmup {self.warmup} + 1: "
                    f"measured with {warmup} warm-up step{'s' * (warmup != 1)}")

    # ------------------------------------------------------------ results

    def why(self, stage: str) -> Dict[str, str]:
        """Why each figure of ``stage`` that has none (FLOPs, memory, per-module time, the trace) is missing."""
        plan, record = self.plan(stage), self.steps.stages[stage]
        done = set(record.roles) | ({"flops"} if stage in self.flops else set())
        reasons = {}
        for role, figure in FIGURE_ROLES.items():
            if role in done and role not in self.errors.get(stage, {}):
                continue
            if role in self.errors.get(stage, {}):
                reasons[role] = self.errors[stage][role]
            elif role == "traced" and self.tracer is None:
                reasons[role] = "--no-trace"
            elif role not in plan.sequence:
                reasons[role] = f"no batch was left for its step ({plan.shrunk})"
            else:
                reasons[role] = (f"the stage ended after {record.seen} of its {plan.total} planned steps, before step "
                                 f"{plan.sequence.index(role) + 1}, which takes {figure}")
        trace = self.tracer.stages.get(stage) if self.tracer is not None else None
        if trace is not None and not trace.files:
            reasons["traced"] = trace.skipped or f"even its first step would pass the cap of {trace.cap:,} events"
        return reasons

    def stage_payload(self, stage: str) -> Dict[str, Any]:
        """Everything recorded for ``stage`` as plain data (every step's role in ``roles``)."""
        record = self.steps.stages[stage]
        roles = record.roles
        plan = self.plan(stage)
        payload: Dict[str, Any] = {
            **{k: v for k, v in asdict(record).items() if v or k not in LOOP_CPU_FIELDS},  # those: --vary's only
            "warmup": roles.index("measured") if "measured" in roles else len(roles),
            "device": self.devices.get(stage, "cpu"), "memory": self.memory.get(stage),
            "flops": self.flops.get(stage), "params": self.params.get(stage), "why": self.why(stage),
            "operators_per_step": self.operators.get(stage), "dispatch_floor_s": self.dispatch_floor_s,
            "stage_notes": self.stage_notes.get(stage, []), "brain": self.brains.get(stage),
            "plan": {"warmup": plan.warmup, "measured": plan.measured, "sequence": plan.sequence}}
        trace = self.tracer.stages.get(stage) if self.tracer is not None else None
        payload["traces"] = list(trace.files) if trace is not None else []
        if trace is not None:
            payload["trace"] = trace.to_dict()
        chosen = self.stage_attribution.get(stage)
        if chosen is not None:
            try:
                payload["modules"] = chosen[0].breakdown(stage).to_dict()
            except Exception as exc:  # e.g. its steps raised
                payload["why"]["modules"] = str(exc)
        return payload


def _compiled(root: Optional[torch.nn.Module]) -> bool:
    """Whether ``root`` or a module inside it is compiled (in place, or a ``torch.compile`` wrapper)."""
    return root is not None and any(getattr(m, "_compiled_call_impl", None) is not None or hasattr(m, "_orig_mod")
                                    for m in root.modules())


def _flops_of(counter: Any) -> Dict[str, Any]:
    from sbprof.analysis.run import RunFlops  # the payload's declaration, read back by the analysis

    result = counter.result()
    backward = result.backward_flops or 0
    return asdict(RunFlops(forward=result.flops, backward=result.backward_flops, total=result.flops + backward,
                           macs=result.macs + (result.backward_macs or 0), untracked=dict(result.untracked),
                           macs_by_precision=dict(result.macs_by_precision)))


def _memory_of(values: tuple, peak: Any) -> Dict[str, Any]:
    if len(values) == 2:
        return {"peak_rss_bytes": values[0], "peak_rss_delta_bytes": values[1], "method": peak.method}
    return {"peak_cuda_bytes": values[0], "peak_cuda_delta_bytes": values[1], "peak_cuda_reserved_bytes": values[2],
            "method": "cuda_allocator"}
