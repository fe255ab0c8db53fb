"""Reading a profiler's recorded sessions: the events of its selected steps, and each step name's measurement.

Each session is parsed once, when first read, on one shared clock; reading
stops a running session first. Only what ran inside the selected steps is
kept (:class:`StepEvents`): whatever the profiler recorded around them stays
in the trace but not in the figures.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, List, Optional

import torch
from torch.autograd.profiler_util import EventList

from sbprof.decorators.recording import RecordingProfiler
from sbprof.decorators.stage_schedule import SHARED_KEY, schedule_key
from sbprof.base.errors import MeasurementError
from sbprof.measuring.events import MemoryRecord, SessionView, StepWindow
from sbprof.record import Cell, Measurement
from sbprof.record.step_payload import StepPayload

FIRST_STEPS_SHOWN = 50  # how far the "nothing recorded yet" message looks into a schedule


class StepEvents(EventList):
    """The events of the selected steps, with the raw memory records and windows they came from."""

    def __init__(self, events: List[Any], windows: List[StepWindow], memory: List[MemoryRecord], **kwargs: Any):
        super().__init__(events, **kwargs)
        self.windows = windows
        self.memory = memory
        # Each session's parent/child tree was built when it was parsed; sessions
        # do not overlap in time, so the joined list needs no new links.
        self._tree_built = True


class StepReader(RecordingProfiler):
    """A :class:`RecordingProfiler` whose sessions are read as the events and timings of its selected steps."""

    def sessions(self) -> List[SessionView]:
        """Every finished session of this profiler, each parsed once, on one shared clock."""
        for session in self._sessions[len(self._views):]:
            origin = self._views[0].origin_ns if self._views else None
            self._views.append(SessionView(session, origin, labelled=True))
        return self._views

    def _nothing_recorded(self) -> MeasurementError:
        error = self._nothing_recorded_yet()
        if self.other_thread_calls:
            error = MeasurementError(f"{error}; {self.other_thread_calls} call(s) from threads other than "
                                     f"{self.thread_name!r} (the first caller) ran unprofiled, as torch's profiler "
                                     "records only the thread that started it: profile it from one thread")
        return error

    def _nothing_recorded_yet(self) -> MeasurementError:
        if self.has_schedule:
            counts = dict(self.stage_steps) or {SHARED_KEY: 0}
            parts = []
            for key, taken in counts.items():
                first = next((i for i in range(taken, taken + FIRST_STEPS_SHOWN) if self.schedule.reports(i)), None)
                where = "it records no further step" if first is None else f"its first recorded step is step {first + 1}"
                parts.append(f"{'' if key == SHARED_KEY else key + ': '}{where}")
            return MeasurementError(
                f"nothing was profiled yet: no step was recorded in the {self.step_num} step(s) taken, and this "
                f"schedule ({self.schedule!r}) is still waiting ({'; '.join(parts)}; steps counted from 1, each Brain "
                "stage counting its own). Each call of a decorated function, and each hooked batch of a Brain or "
                "pretrained interface, is one step; a function that loops by itself calls sbprof.step() once per "
                "iteration")
        return MeasurementError("nothing was profiled yet: no profiled call has run")

    def events(self, step: Optional[str] = None) -> StepEvents:
        """Events that ran inside the selected steps (or inside the steps named ``step``), every session joined."""
        self.stop()
        if self.timing_only:
            raise MeasurementError("this profiler was made with activities=() (timing only): it records no "
                                   "operator events; read step_wall_s / measurement() instead")
        views = self.sessions()
        events: List[Any] = []
        windows: List[StepWindow] = []
        memory: List[MemoryRecord] = []
        for view in views:
            chosen = [w for w in view.windows if (w.step == step if step is not None else self.selects(w.step))]
            windows += chosen
            events += view.events_in(chosen)
            memory += view.memory
        if step is not None and not windows and self.has_schedule and self.stage_steps.get(schedule_key(step)):
            taken = self.stage_steps[schedule_key(step)]
            first = next((i for i in range(taken, taken + FIRST_STEPS_SHOWN) if self.schedule.reports(i)), None)
            where = "it records no further step" if first is None else f"its first recorded step is step {first + 1}"
            raise MeasurementError(f"no {step!r} step was recorded: {taken} step(s) taken, and its schedule "
                                   f"({self.schedule!r}, counted for each stage on its own) has not reached its "
                                   f"recorded part ({where}; steps counted from 1)")
        if step is not None and not windows and any(v.windows for v in views):
            raise MeasurementError(f"no recorded step is named {step!r}; recorded: "
                                   f"{sorted({w.step for v in views for w in v.windows if self.selects(w.step)})}")
        if not windows:
            raise self._nothing_recorded()
        first = views[0].function_events
        return StepEvents(events, windows, memory, use_device=first._use_device,
                          profile_memory=first._profile_memory, with_flops=first._with_flops)

    @property
    def recorded_steps(self) -> int:
        """How many selected steps the recorded sessions hold."""
        if self.timing_only:
            return 0
        self.stop()
        return sum(self.selects(w.step) for view in self.sessions() for w in view.windows)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False, include_python_functions: bool = False) -> EventList:
        """Events of the selected steps aggregated by operator (as ``torch.profiler.profile.key_averages``)."""
        # Older torch (2.4-2.11) lacks the last two grouping options: pass them only when asked.
        extra = {k: v for k, v in (("group_by_overload_name", group_by_overload_name),
                                   ("include_python_functions", include_python_functions)) if v}
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, **extra)

    def measurement(self, step: str) -> Measurement:
        """Every selected step of one name as a :class:`Measurement`.

        Raw samples: wall and process CPU time of each step (device-synchronised
        on CUDA). When operators were recorded, ``extra`` adds the recorded
        steps' ``report_time`` figures (``operator_cpu_us``, ``device_us``), and
        with ``profile_memory`` the ``report_memory`` peaks (bytes).
        """
        if not self.step_wall_s.get(step):
            raise MeasurementError(f"no step {step!r} was timed; timed steps: {sorted(self.step_wall_s)}")
        from sbprof.measuring.env import collect_env
        from sbprof.measuring.events import device_us, operator_cpu_us, peak_per_window

        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"
        extra = StepPayload()
        self.stop()  # as every read does: what ran so far becomes readable (a timing-only profiler has none)
        if any(w.step == step for view in self.sessions() for w in view.windows):
            events = self.events(step)
            extra = StepPayload(recorded_steps=len(events.windows), operator_cpu_us=operator_cpu_us(events),
                                device_us=device_us(events))
            if self.profile_memory:
                peaks = peak_per_window(events.memory, events.windows)
                extra = replace(extra, allocated_peak_cpu_bytes=max(c for c, _ in peaks),
                                allocated_peak_device_bytes=max(d for _, d in peaks))
        return Measurement(label=step, cell=Cell(model=step, device=device, threads=torch.get_num_threads()),
                           wall_s=list(self.step_wall_s[step]), cpu_s=list(self.step_cpu_s[step]),
                           settings={"schedule": repr(self.schedule) if self.has_schedule else None,
                                     "record_shapes": self.record_shapes, "with_stack": self.with_stack,
                                     "profile_memory": self.profile_memory, "timing_only": self.timing_only},
                           env=collect_env(), extra=extra.to_dict())
