"""Reading profiler events: interval unions, device events counted once, memory replay per step."""
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from sbprof.measuring.events import (DISCARD_LABEL, MemoryRecord, StepWindow, device_us, is_operator, operator_cpu_us,
                           peak_per_window, step_label, step_windows, union_us, warmup_label)
from sbprof.decorators.reports import report_time


def _event(i, name, start, end, thread=1, kind="cpu_op", device=DeviceType.CPU, **kw):
    return FunctionEvent(id=i, name=name, thread=thread, start_us=start, end_us=end, device_type=device,
                         activity_type=kind, **kw)


def test_union_counts_overlaps_once():
    assert union_us([]) == 0
    assert union_us([(0, 4), (1, 2), (3, 6), (10, 11)]) == 7


def test_operator_time_ignores_annotations_frames_and_nests_once():
    events = [
        _event(1, "ProfilerStep#0", 0, 1000, kind="user_annotation", is_user_annotation=True),
        _event(2, "train.py(3): step", 0, 900, kind="python_function", is_python_function=True),
        _event(3, "aten::linear", 100, 300),
        _event(4, "aten::addmm", 120, 290),  # nested in linear: inside its interval already
        _event(5, "aten::relu", 400, 450),
        _event(6, "aten::mm", 100, 200, thread=2),  # another thread (e.g. autograd's): adds its own time
    ]
    assert [is_operator(e) for e in events] == [False, False, True, True, True, True]
    assert operator_cpu_us(events) == 200 + 50 + 100


def test_device_time_counts_each_kernel_once():
    op = _event(1, "aten::mm", 0, 50, use_device="cuda")
    kernels = [_event(10 + i, f"gemm{i}", 100 + 30 * i, 120 + 30 * i, kind="kernel", device=DeviceType.CUDA)
               for i in range(3)]
    for k in kernels:  # torch links kernels to their launching op: its own device time holds them
        op.append_kernel(k.name, 0, k.time_range.elapsed_us())
    events = EventList([op] + kernels)
    assert op.self_device_time_total == 60  # already the kernels' sum
    assert device_us(events) == 60  # the three kernels, once: not 120
    assert report_time(events) == (50.0, 60.0)


def test_peak_restarts_at_each_window_and_sees_frees_in_time_order():
    a = [MemoryRecord(10, 16, 0), MemoryRecord(11, 16, 0), MemoryRecord(12, -16, 0), MemoryRecord(13, -16, 0)]
    b = [MemoryRecord(30, 32, 8), MemoryRecord(31, -32, -8)]
    windows = [StepWindow("s", 5, 20), StepWindow("s", 25, 40), StepWindow("s", 50, 60)]
    assert peak_per_window(a + b, windows) == [(32, 0), (32, 8), (0, 0)]
    # a free of memory allocated before the window does not lower the window's peak below zero
    assert peak_per_window([MemoryRecord(1, -64, 0), MemoryRecord(2, 8, 0)], [StepWindow("s", 0, 5)]) == [(0, 0)]


def test_real_nested_operators_match_torch_self_times():
    from torch.profiler import ProfilerActivity, profile

    m = torch.nn.Linear(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        m(torch.randn(8, 32)).sum().backward()
    # torch's own table, summed over operator rows only, against the interval union
    torch_total = sum(e.self_cpu_time_total for e in p.events() if is_operator(e))
    assert abs(operator_cpu_us(p.events()) - torch_total) <= 0.01 * torch_total


class _Annotation:
    """The parts of a kineto event that step_windows reads."""

    def __init__(self, name, start, end, annotation=True, device=DeviceType.CPU):
        self._name, self._start, self._end, self._annotation, self._device = name, start, end, annotation, device

    def name(self):
        return self._name

    def start_ns(self):
        return self._start

    def end_ns(self):
        return self._end

    def is_user_annotation(self):
        return self._annotation

    def device_type(self):
        return self._device


def test_step_windows_leave_out_warmup_steps_and_windows_marked_discarded():
    raw = [
        _Annotation(warmup_label("train"), 0, 10),  # recorded so the next step's frees are known
        _Annotation(step_label("train"), 20, 30),
        _Annotation(step_label("loop"), 40, 90),  # a call whose tail (60-90) followed its last sbprof.step()
        _Annotation(step_label("inner"), 50, 55),  # a step nested in it, not the one the marker belongs to
        _Annotation(DISCARD_LABEL, 89, 89),
        _Annotation(step_label("op"), 95, 99, annotation=False),  # an operator that happens to share the name
    ]
    assert step_windows(raw) == [StepWindow("train", 20, 30), StepWindow("inner", 50, 55)]


def test_the_mirror_of_a_step_on_the_gpu_timeline_is_not_a_second_step():
    """On a GPU the profiler draws each record_function range again on the device's timeline, around its kernels
    (gpu_user_annotation; kineto's is_user_annotation() is True for it too): one step, not two."""
    raw = [
        _Annotation(step_label("train"), 0, 100),
        _Annotation(step_label("train"), 30, 120, device=DeviceType.CUDA),  # its kernels ran late and past the end
        _Annotation(step_label("train"), 150, 250),
        _Annotation(DISCARD_LABEL, 160, 160, device=DeviceType.CUDA),  # a mirrored marker discards nothing
        _Annotation(step_label("train"), 170, 260, device=DeviceType.CUDA),
    ]
    assert step_windows(raw) == [StepWindow("train", 0, 100), StepWindow("train", 150, 250)]


def test_device_time_leaves_out_the_ranges_mirrored_on_the_gpu_timeline():
    """First contact with an H200 (2026-11-26): the record_function range the profiler draws again on the GPU's
    timeline around its kernels was counted as GPU busy time beside them (6.9 ms in a 5.8 ms wall)."""
    kernels = [_event(10 + i, f"gemm{i}", 100 + 30 * i, 120 + 30 * i, kind="kernel", device=DeviceType.CUDA)
               for i in range(3)]
    mirrored = _event(20, step_label("train"), 90, 200, kind="gpu_user_annotation", device=DeviceType.CUDA)
    flagged = _event(21, "my_range", 95, 190, kind=None, device=DeviceType.CUDA, is_user_annotation=True)
    assert device_us(EventList(kernels + [mirrored, flagged])) == 60  # the three kernels only
    assert report_time(EventList(kernels + [mirrored])).cuda_us == 60
