"""The parts of sbprof run's stage life in one process, fast: the plans, the step clocks' loop and regions, the
trace's cap. (The same parts on real scripts, in fresh processes: the other tests of this folder.)"""
from __future__ import annotations

import json
import time

import pytest
import torch

from sbprof.script.lifecycle import stage_plan
from sbprof.script.steps import Steps
from sbprof.script.trace import Tracer


def test_a_short_stage_keeps_its_measured_steps_first():
    # 4 batches: 2 warm-up, 2 measured, nothing left for the other figures.
    plan = stage_plan(2, 5, batches=4)
    assert plan.sequence == ["warmup", "flops", "measured", "measured"]
    assert plan.shrunk == "the stage has 4 batches: 2 measured of --measured 5"
    # 1 batch: measured, with no warm-up (and no FLOP step left).
    assert stage_plan(2, 5, batches=1).sequence == ["measured"]
    # Enough batches: the full plan, whatever the count.
    assert stage_plan(2, 5, batches=100) == stage_plan(2, 5)


def test_time_between_runs_from_the_stages_last_step_less_the_wait_and_sbprofs_own_work():
    steps = Steps()
    steps.begin("train")
    steps.end()
    last_end = steps._last_end[1]
    t0 = time.perf_counter()
    steps.add_wait(t0 + 0.01, t0 + 0.03)  # a __next__ of 20 ms
    steps.add_own(t0 + 0.03, t0 + 0.04)  # sbprof's own work, 10 ms
    while time.perf_counter() < t0 + 0.05:  # the script's own time between steps (preprocessing...)
        pass
    steps.begin("train")
    start = steps.current.wall0
    steps.end()
    record = steps.stages["train"]
    assert record.between_s[0] is None  # nothing before the first step: unknown, not zero
    assert record.data_wait_s[1] == pytest.approx(0.02)
    # From the last step's end to this one's start, less the wait and sbprof's own work (a replay of the clocks).
    assert record.between_s[1] == pytest.approx(start - last_end - 0.03, abs=1e-9) and record.between_s[1] >= 0.02
    # After another stage's step, the iteration starts at this stage's first __next__.
    t1 = time.perf_counter()
    time.sleep(0.01)
    steps.add_wait(t1, t1 + 0.005)
    steps.begin("valid")
    start = steps.current.wall0
    steps.end()
    assert steps.stages["valid"].between_s[0] == pytest.approx(start - t1 - 0.005, abs=1e-9)


def test_a_stage_past_its_plan_between_two_steps_of_another_is_no_time_between_them():
    # train's step, then valid's steps past its plan (counted, not recorded; they take 50 ms), then train again:
    # train's time between starts at the first __next__ after valid's last step, not at its own last step.
    steps = Steps()
    steps.begin("train")
    steps.end()
    steps.begin("valid", role=None)
    time.sleep(0.05)
    steps.end()
    t0 = time.perf_counter()
    steps.add_wait(t0, t0 + 0.002)
    time.sleep(0.01)
    steps.begin("train")
    start = steps.current.wall0
    steps.end()
    assert steps.stages["train"].between_s[1] == pytest.approx(start - t0 - 0.002, abs=1e-9)
    assert steps.stages["train"].between_s[1] < 0.05  # the replay above, less than valid's 50 ms


def test_regions_entered_before_the_step_count_from_its_start_and_the_closure_counts_for_none():
    steps = Steps()
    steps.enter("optimizer")  # LBFGS: Optimizer.step starts, then its closure calls the model
    steps.enter("closure")
    time.sleep(0.005)  # before the step: no region's
    steps.begin("train")
    closure = time.perf_counter()
    time.sleep(0.005)  # the closure's own time: no region's
    with steps.region("forward"):
        time.sleep(0.005)
    closure = time.perf_counter() - closure
    steps.leave("closure")
    a = time.perf_counter()
    time.sleep(0.005)  # the optimiser's own update
    b = time.perf_counter()
    steps.leave("optimizer")
    steps.end()
    record = steps.stages["train"]
    assert record.forward_s[0] >= 0.005 and record.optimizer_s[0] >= b - a >= 0.005
    assert record.optimizer_s[0] < b - a + closure / 2  # none of the closure's 10 ms or more
    assert record.forward_s[0] + record.optimizer_s[0] <= record.wall_s[0]


class _Loop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n):
        for _ in range(n):
            x = torch.tanh(self.lin(x))
        return x


def test_the_trace_stops_collecting_inside_a_step_before_its_cap(tmp_path, capfd):
    model, x = _Loop(), torch.randn(2, 4)
    tracer = Tracer(tmp_path, log=lambda line: None, cap=2000)
    checkpoints = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: checkpoints.append(1))
    try:
        from sbprof.measuring.flops import FlopCounter

        with FlopCounter() as counter:  # the FLOP step: operators and checkpoints of one step
            model(x, 200).sum().backward()
        tracer.expect("train", counter.operators, len(checkpoints))
        handle.remove()
        handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: tracer.checkpoint())
        assert tracer.begin_step("train", 10, "cpu")
        model(x, 200).sum().backward()
        assert tracer.end_step("train", last=False)  # cut inside the step
        assert not tracer.begin_step("train", 11, "cpu")  # and no later step is traced
    finally:
        handle.remove()
    trace = tracer.stages["train"]
    assert trace.cut_in_step == 10 and 0 < trace.events <= 2000 and trace.steps == []
    events = json.loads(open(trace.files[0]).read())["traceEvents"]
    assert 0 < len([e for e in events if e.get("ph") == "X"]) <= 2000
    # The profiler's console lines (gpuGetDeviceCount, USDT...) never reach the user's terminal.
    assert "gpuGetDeviceCount" not in capfd.readouterr().err


def test_a_trace_under_its_cap_keeps_whole_steps_and_learns_their_real_count(tmp_path):
    model, x = _Loop(), torch.randn(2, 4)
    tracer = Tracer(tmp_path, log=lambda line: None, cap=100_000)
    tracer.expect("train", 100, 5)
    for index in (10, 11):
        assert tracer.begin_step("train", index, "cpu")
        model(x, 5).sum().backward()
        assert not tracer.end_step("train", last=index == 11)
    trace = tracer.stages["train"]
    assert trace.steps == [10, 11] and trace.cut_in_step is None and len(trace.files) == 1
    assert tracer._expected["train"] == pytest.approx(trace.events / 2)


def test_a_stray_model_call_before_a_brains_step_is_no_step_and_gives_its_index_back():
    from sbprof.script.session import Session

    session = Session(warmup=2, measured=5, keep_going=True, trace_dir=None)
    # A module called with gradients outside the Brain's calls opens a loop step that no optimiser step ends...
    assert session.begin("train", "loop", None, "cpu") == "warmup"
    # ...then the Brain's own first step: it is step 1, a warm-up step, of a Brain stage.
    assert session.begin("train", "brain", None, "cpu") == "warmup"
    session.end()
    record = session.steps.stages["train"]
    assert (record.roles, record.seen, record.kind, session.found["train"]) == (["warmup"], 1, "brain", "brain")


def test_stages_lets_an_unasked_loop_run_on_and_stops_the_script_once_the_asked_stage_has_its_steps():
    # A script that trains a plain loop, then calls an interface: --stages transcribe_batch. The loop's stage has
    # an empty plan; it must not stop the script (it did: its steps were "past their plan" from the second on).
    from sbprof.script.session import Session, StopRun

    session = Session(warmup=1, measured=2, keep_going=False, trace_dir=None, stages=("transcribe_batch",))
    for _ in range(20):
        assert session.begin("train", "loop", None, "cpu") is None  # unmeasured
        session.end()
    roles = []
    with pytest.raises(StopRun):
        for _ in range(50):
            roles.append(session.begin("transcribe_batch", "inference", None, "cpu"))
            session.end()
    # Stopped at the first step past the asked stage's plan, its measured steps taken
    assert len(roles) == len(session.plan("transcribe_batch").sequence) and roles.count("measured") == 2
    assert list(session.steps.stages) == ["train", "transcribe_batch"] and session.steps.stages["train"].roles == []
