"""report_time / report_memory / events_diff against ground truths from outside sbprof:
known allocations, the allocator's own "Total Allocated" records, torch's own table totals,
known sleeps, and a Brain's steps timed from outside."""
import time

import pytest
import torch
from helpers.decorator_brains import MiB, allocator_step_peaks, data, make_brain, replay_peaks
from torch.profiler import ProfilerAction, record_function

from sbprof import (MeasurementError, events_diff, export, profile, profile_analyst, profile_optimiser,
                    report_memory, report_time, step)
from sbprof.measuring.events import is_operator, peak_per_window

PEAK = 32 * MiB


def two_blocks_then_free():
    """16 MiB + 16 MiB alive together, both freed outside any operator: true peak 32 MiB."""
    a = torch.ones(16 * MiB // 4)
    b = torch.ones(16 * MiB // 4)
    del a, b


def close_to(value, truth, rel=0.02):
    return abs(value - truth) <= rel * truth


# ---------------------------------------------------------------- memory

def test_memory_plain_profile():
    @profile(profile_memory=True)
    def f():
        two_blocks_then_free()

    assert close_to(report_memory(f()).cpu_bytes, PEAK)


def test_memory_frees_inside_record_function():
    @profile(profile_memory=True)
    def f():
        with record_function("block"):  # frees here were charged to the block's start
            two_blocks_then_free()

    assert close_to(report_memory(f()).cpu_bytes, PEAK)


@pytest.mark.parametrize("decorator", [profile_optimiser, profile_analyst])
def test_memory_scheduled_decorators_on_repeated_calls(decorator):
    @decorator(wait=1, warmup=1, active=2)
    def f():
        two_blocks_then_free()

    for _ in range(4):
        f()
    assert f.profiler.recorded_steps == 2
    assert close_to(report_memory(f.profiler).cpu_bytes, PEAK)


def test_memory_scheduled_function_with_its_own_loop():
    from sbprof import step

    @profile_optimiser(wait=0, warmup=1, active=2)
    def loop():
        for _ in range(4):
            two_blocks_then_free()
            step()

    assert close_to(report_memory(loop()).cpu_bytes, PEAK)


def mlp_step_loop(decorate, calls):
    """The issue's loop: zero_grad at the top of each step (its gradients were allocated in the step before)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(3)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 1024)

    @decorate
    def train_step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    for _ in range(calls):
        train_step(x)
    return train_step


def labelled(fn):
    """Each call under a ``truth:<i>`` label, for a raw profiler that records every call."""
    count = [0]

    def call(*args):
        with record_function(f"truth:{count[0]}"):
            count[0] += 1
            return fn(*args)
    return call


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
@pytest.mark.parametrize("args, calls", [
    ({}, 10),  # the default schedule: wait 1, warm-up 2, active 5
    ({"repeat": 2}, 16),  # the first recorded step of each cycle
    ({"wait": 1, "warmup": 0, "active": 3, "repeat": 2}, 8),  # no warm-up: the step before is recorded
])
def test_first_recorded_step_sees_the_frees_of_the_step_before(args, calls):
    prof = mlp_step_loop(profile_optimiser(**args), calls).profiler
    events = prof.events()
    reported = [cpu for cpu, _ in peak_per_window(events.memory, events.windows)]
    # Ground truth: a raw profiler recording from before the first call, replayed by the test itself;
    # torch's own schedule says which calls were recorded.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as raw:
        mlp_step_loop(labelled, calls)
    truth = replay_peaks(raw, "truth:")
    plan = torch.profiler.schedule(**{"wait": 1, "warmup": 2, "active": 5, **args})
    recorded = [i for i in range(calls) if plan(i) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)]
    expected = [truth[f"truth:{i}"] for i in recorded]
    assert prof.recorded_steps == len(recorded) == len(reported)
    # exact: the same allocations, each free seen (the first recorded step read +12 MiB more before)
    assert reported == expected, ([r / MiB for r in reported], [t / MiB for t in expected])
    assert report_memory(prof).cpu_bytes == max(expected) < 1 * MiB


def test_each_iteration_of_a_function_loop_is_a_step():
    kept = []

    @profile_optimiser  # default schedule: iterations 4 to 8 of 10 recorded
    def train():
        for _ in range(10):
            kept.append(torch.ones(MiB // 4))  # each iteration allocates 1 MiB and keeps it
            step()
        torch.ones(8 * MiB // 4)  # after the last step(): not a step

    prof = train()
    assert prof.step_num == 10 and prof.recorded_steps == 5 and len(prof.step_wall_s["train"]) == 10
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::ones") == 5
    # per iteration 1 MiB, not the 5 MiB the recorded iterations hold together, nor the tail's 8 MiB
    assert report_memory(prof).cpu_bytes == MiB


def test_a_step_that_raises_is_not_a_step():
    @profile(profile_memory=True)
    def fails():
        torch.ones(MiB // 4)
        raise ValueError("boom")

    with pytest.raises(ValueError):
        fails()
    assert fails.profiler.step_wall_s == {}
    with pytest.raises(MeasurementError, match="nothing was profiled"):
        report_memory(fails.profiler)


def test_memory_does_not_add_up_over_sessions():
    class Peaky(torch.nn.Module):
        def forward(self, x):
            two_blocks_then_free()
            return x

    model = profile(Peaky(), profile_memory=True)
    for _ in range(4):  # four calls, four sessions, each peaking at 32 MiB
        model(torch.zeros(1))
    assert close_to(report_memory(model).cpu_bytes, PEAK)


def test_memory_tells_which_calls_were_recorded():
    @profile_optimiser(wait=1, warmup=2, active=3)
    def grow(i):
        x = torch.ones((i + 1) * MiB // 4)  # call i holds (i+1) MiB
        del x

    for i in range(9):
        grow(i)
    # calls 4, 5, 6 (i = 3, 4, 5) are the recorded steps: the largest holds 6 MiB
    assert report_memory(grow.profiler).cpu_bytes == 6 * MiB
    assert sum(e.count for e in grow.profiler.key_averages() if e.key == "aten::ones") == 3


def test_memory_on_a_brain_matches_the_allocators_records(tmp_path):
    brain = export(profile_optimiser(make_brain(), wait=1, warmup=1, active=3), dir_name=str(tmp_path))
    brain.fit(range(1), data(6))
    truth = allocator_step_peaks(tmp_path)
    assert [name for name, _ in truth] == ["sbprof.step:train"] * 3
    assert report_memory(brain).cpu_bytes == max(peak for _, peak in truth) > 0


def test_memory_needs_times():
    @profile(profile_memory=True)
    def f():
        two_blocks_then_free()

    prof = f()
    with pytest.raises(MeasurementError, match="key_averages"):
        report_memory(prof.key_averages())
    assert close_to(report_memory(prof.events()).cpu_bytes, PEAK)  # sbprof's events() keep the records
    with pytest.raises(MeasurementError, match="profile_memory=True"):
        @profile
        def g():
            two_blocks_then_free()
        report_memory(g())


# ---------------------------------------------------------------- time

def test_time_excludes_host_time_outside_operators():
    a = torch.randn(128, 128)
    walls = []

    @profile_optimiser(wait=0, warmup=1, active=2)
    def step_with_sleep():
        t0 = time.perf_counter()
        for _ in range(5):
            a @ a
        time.sleep(0.05)
        walls.append(time.perf_counter() - t0)

    for _ in range(3):
        step_with_sleep()
    cpu_us, cuda_us = report_time(step_with_sleep.profiler)
    # torch's own table over the operator rows (all aten ops here) is the cross-check
    table = sum(e.self_cpu_time_total for e in step_with_sleep.profiler.key_averages() if e.key.startswith("aten::"))
    assert close_to(cpu_us, table, rel=0.01)
    # the two recorded steps (calls 2 and 3) minus their 50 ms sleeps bound the operators' time
    assert 0 < cpu_us <= (sum(walls[1:]) - 2 * 0.05) * 1e6
    assert cuda_us == 0


def test_time_under_analyst_on_a_brain_fits_in_the_recorded_steps():
    brain = make_brain()
    outside = []
    inner = brain.fit_batch

    def timed_fit_batch(batch):  # an outside clock around each step, below sbprof's hook
        t0 = time.perf_counter()
        try:
            return inner(batch)
        finally:
            outside.append(time.perf_counter() - t0)

    brain.fit_batch = timed_fit_batch
    profile_analyst(brain, wait=1, warmup=2, active=4)
    brain.fit(range(1), data(10), data(3))
    recorded_wall_us = sum(outside[3:7]) * 1e6  # steps 4..7 were recorded
    cpu_us, _ = report_time(brain)
    assert 0 < cpu_us <= recorded_wall_us
    # torch's own self times over the same operator events agree (nothing nested is counted twice)
    torch_total = sum(e.self_cpu_time_total for e in brain.profiler.events() if is_operator(e))
    assert close_to(cpu_us, torch_total, rel=0.01)


def test_time_matches_outside_clocks_for_operator_bound_work():
    """Operators run inside the outside wall clock (an upper bound), and their durations hold at least the CPU
    time they used: the body's own CPU time, nearly all operators, bounds the figure from below. Other
    processes stretch wall times, never the CPU time the work needs, so neither bound moves under load."""
    a = torch.randn(384, 384)
    body_cpu = []

    @profile
    def work():
        c0 = time.thread_time()
        for _ in range(30):
            a @ a
        body_cpu.append(time.thread_time() - c0)

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the operators' CPU time is this thread's
    try:
        work()  # warm
        t0 = time.perf_counter()
        prof = work()
        wall_us = (time.perf_counter() - t0) * 1e6
    finally:
        torch.set_num_threads(before)
    cpu_us, _ = report_time(prof)
    assert 0.5 * body_cpu[-1] * 1e6 < cpu_us <= wall_us, (body_cpu[-1] * 1e6, cpu_us, wall_us)


@pytest.mark.parametrize("calls", [1, 2, 3])
def test_reports_before_the_first_recorded_step_are_refused(calls):
    @profile_optimiser  # wait 1, warm-up 2: the 4th call is the first recorded step
    def f():
        torch.ones(100) + 1

    for _ in range(calls):
        f()
    for report in (report_time, report_memory):  # a zero here would read as a measured zero
        with pytest.raises(MeasurementError, match=rf"no step was recorded in the {calls} step.*"
                                                   r"first recorded step is step 4"):
            report(f.profiler)
    assert f.profiler.recorded_steps == 0
    for _ in range(4 - calls):  # reading stopped the recording: the next calls resume it
        f()
    assert f.profiler.recorded_steps == 1 and report_time(f.profiler).cpu_us > 0


def test_time_per_stage_on_a_brain():
    brain = profile(make_brain(), stages=["train", "valid"])
    brain.fit(range(1), data(4), data(2))
    train, valid = report_time(brain, stage="train"), report_time(brain, stage="valid")
    both = report_time(brain)
    assert train.cpu_us > 0 and valid.cpu_us > 0
    assert close_to(train.cpu_us + valid.cpu_us, both.cpu_us, rel=1e-6)
    keys_valid = {e.key for e in brain.profiler.events("valid").key_averages()}
    assert "autograd::engine::evaluate_function: MmBackward0" not in keys_valid  # no backward in validation
    with pytest.raises(MeasurementError, match="no recorded step is named 'test'"):
        report_time(brain, stage="test")


# ---------------------------------------------------------------- events_diff

def test_events_diff_on_every_form():
    x = torch.randn(8)

    @profile
    def f():
        x.relu()

    @profile
    def g():
        x.relu().sigmoid()

    pf, pg = f(), g()
    for a, b in ((pf, pg), (pf.key_averages(), pg.key_averages()), (pf.events(), pg.events())):
        only_f, only_g = events_diff(a, b)
        assert [e.key for e in only_g] == ["aten::sigmoid"] and len(only_f) == 0


def test_operators_of_a_real_profile_are_recognised():
    @profile(with_stack=True)
    def f():
        torch.randn(4, 4).relu()

    keys = {e.name for e in f().events() if is_operator(e)}
    assert {"aten::randn", "aten::relu"} <= keys
    assert not any(k.startswith(("sbprof.step:", "ProfilerStep")) for k in keys)
