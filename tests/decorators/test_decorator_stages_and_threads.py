"""Each Brain stage on its own schedule (fit then evaluate, as every SpeechBrain recipe ends), and one decorated
function called from several threads at once: its steps never overlap in one report."""
import threading
import time

import pytest

import sbprof
from sbprof.base.errors import MeasurementError
from helpers.decorator_brains import data, make_brain


def test_fit_then_evaluate_records_the_test_stage_with_its_own_schedule():
    brain = sbprof.profile_optimiser(make_brain())  # the README's one line, default schedule
    brain.fit(range(1), data(10), data(3))
    brain.evaluate(data(10))
    prof = brain.profiler
    assert prof.stage_steps == {"train": 10, "test": 10}  # fit's validation is not selected by default
    assert len(prof.step_wall_s["test"]) == 10
    windows = [w.step for view in prof.sessions() for w in view.windows]
    assert windows.count("train") == 5 and windows.count("test") == 5  # steps 4-8 of each stage
    assert prof.measurement("test").extra["recorded_steps"] == 5


def test_an_evaluation_too_short_for_its_schedule_is_refused_naming_each_stage():
    brain = sbprof.profile_optimiser(make_brain(), stages=["test"])
    brain.evaluate(data(2))
    with pytest.raises(MeasurementError, match=r"test: its first recorded step is step 4"):
        brain.profiler.events()


def test_one_decorated_function_called_from_four_threads_runs_its_calls_one_at_a_time():
    @sbprof.profile_optimiser(wait=0, warmup=0, active=100)
    def work():
        time.sleep(0.01)

    def caller():
        for _ in range(4):
            work()

    threads = [threading.Thread(target=caller) for _ in range(4)]
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="calls from other threads run unprofiled") as said:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    elapsed = time.perf_counter() - start
    walls = work.profiler.step_wall_s["work"]
    # The first caller's 4 calls are the steps; the other threads' 12 run unprofiled, said once.
    assert len(walls) == 4 and work.profiler.other_thread_calls == 12 and len(said) == 1
    # Serialised: the steps fit end to end in the elapsed time (overlapping steps would sum to more).
    assert sum(walls) <= elapsed
    assert all(w < 0.05 for w in walls)  # no step holds another thread's sleep


def test_calls_from_a_second_thread_are_said_at_once_and_never_taken_for_recorded_steps():
    """Torch's profiler records only the thread that started it: before, the other threads' calls were counted as
    steps, the recording lost them, and report_time said the schedule 'is still waiting' after 18 steps."""
    import torch

    @sbprof.profile_optimiser
    def step(x):
        return (x @ x).sum() if threading.current_thread() is threading.main_thread() else (x + x).sum()

    x = torch.randn(32, 32)
    step(x)  # the main thread calls first: its calls are the steps
    with pytest.warns(UserWarning, match=r"called from thread 'helper-0', but its steps are the calls of thread "
                                         r"'MainThread' \(its first caller\): torch's profiler records only"):
        helpers = [threading.Thread(target=lambda: [step(x) for _ in range(6)], name=f"helper-{i}") for i in range(3)]
        for i, t in enumerate(helpers):
            t.start()
            t.join()  # one after the other: helper-0 calls first
    with pytest.raises(MeasurementError, match=r"18 call\(s\) from threads other than 'MainThread' \(the first "
                                               r"caller\) ran unprofiled"):
        sbprof.report_time(step)
    for _ in range(8):  # the first caller's own steps: wait 1, warm-up 2, then 5 recorded
        step(x)
    assert step.profiler.step_num == 9 and step.profiler.recorded_steps == 5
    names = {e.key for e in step.profiler.key_averages()}
    assert "aten::mm" in names and "aten::add" not in names  # only the main thread's operators were recorded


def test_a_stage_that_never_reached_its_recorded_steps_says_so_when_read():
    from sbprof import report_time

    brain = sbprof.profile_optimiser(make_brain())
    brain.fit(range(1), data(10), None)
    brain.evaluate(data(2))  # SpeechBrain's LM_RNN example evaluates 2 batches
    assert report_time(brain, stage="train").cpu_us > 0
    with pytest.raises(MeasurementError, match=r"no 'test' step was recorded: 2 step\(s\) taken.*"
                                               r"its first recorded step is step 4"):
        report_time(brain, stage="test")
