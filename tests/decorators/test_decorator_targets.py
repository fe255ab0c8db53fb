"""@profile / @profile_optimiser / @profile_analyst on functions, classes, modules,
real SpeechBrain Brains (trained with Brain.fit) and a real pretrained interface."""
import time

import pytest
import torch
from helpers.decorator_brains import TinyBrain, data, make_brain, marker_steps
from torch.profiler import ProfilerAction

import sbprof
from sbprof import (ConfigError, StepProfiler, export, profile, profile_analyst, profile_optimiser, report_time,
                    schedule, step)


# ---------------------------------------------------------------- functions

def test_void_function_returns_its_profiler():
    @profile
    def train(x):
        (x ** 2).sum().backward()

    prof = train(torch.randn(5, requires_grad=True))
    assert isinstance(prof, torch.profiler.profile) and prof is train.profiler
    assert "aten::pow" in {e.key for e in prof.key_averages()}


def test_function_with_result_keeps_it():
    @profile(record_shapes=True)
    def double(x):
        return x * 2

    out = double(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))  # the result, not the profiler
    assert double.profiler.record_shapes and len(double.profiler.events()) > 0


def test_each_unscheduled_call_gets_a_fresh_profiler():
    @profile
    def f():
        torch.ones(2) + 1

    first, second = f(), f()
    assert first is not second and f.profiler is second


def test_scheduled_function_calls_are_the_steps_of_one_profiler():
    @profile_optimiser(wait=1, warmup=2, active=3)
    def infer(n):
        return torch.arange(n).sum()

    results = [infer(n) for n in range(1, 9)]
    assert [int(r) for r in results] == [n * (n - 1) // 2 for n in range(1, 9)]  # results untouched
    prof = infer.profiler
    assert prof.step_num == 8 and prof.recorded_steps == 3
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::sum") == 3


def test_scheduled_function_waiting_says_why():
    @profile_optimiser(wait=3, warmup=2, active=1)
    def f():
        torch.ones(1)

    f()
    with pytest.raises(sbprof.MeasurementError, match=r"1 step\(s\) taken.*first recorded step is step 6.*sbprof.step"):
        f.profiler.events()


def test_method_of_a_class():
    class Model:
        @profile
        def run(self, x):
            return x.relu()

    m = Model()
    m.run(torch.randn(4))
    assert "aten::relu" in {e.key for e in m.run.profiler.key_averages()}


def test_schedule_and_export_stack_in_either_order(tmp_path):
    @export(dir_name=str(tmp_path / "a"))
    @schedule(wait=0, warmup=1, active=2)
    @profile
    def outer():
        for _ in range(4):
            torch.randn(32, 32) @ torch.randn(32, 32)
            step()

    @profile
    @schedule(wait=0, warmup=1, active=2)
    @export(dir_name=str(tmp_path / "b"))
    def inner():
        for _ in range(4):
            torch.randn(32, 32) @ torch.randn(32, 32)
            step()

    for f, folder in ((outer, "a"), (inner, "b")):
        prof = f()
        assert prof.step_num == 4
        assert marker_steps(prof) == 2  # step 0 was warm-up, step 3 came after the cycle
        traces = list((tmp_path / folder).glob("*.pt.trace.json"))
        assert len(traces) == 1 and traces[0].stat().st_size > 0


def test_schedule_is_a_torch_schedule():
    s = schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s(i) for i in range(5)] == [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                       ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE]


# ---------------------------------------------------------------- bad use

@pytest.mark.parametrize("bad", [42, "text", object()])
def test_not_profilable(bad):
    with pytest.raises(ConfigError, match="cannot profile"):
        profile(bad)


@pytest.mark.parametrize("kwargs", [{"active": 0}, {"wait": -1}, {"warmup": 1.5}, {"repeat": True}])
def test_invalid_schedule_numbers(kwargs):
    with pytest.raises(ConfigError, match="schedule"):
        schedule(**kwargs)


def test_invalid_hooks_stages_and_double_decoration():
    with pytest.raises(ConfigError, match="class_hooks"):
        profile(class_hooks="fit")
    with pytest.raises(ConfigError, match="no method"):
        profile(torch.nn.Linear(2, 2), class_hooks=["transcribe_batch"])
    with pytest.raises(ConfigError, match="stages"):
        profile(make_brain(), stages=["training"])
    with pytest.raises(ConfigError, match="not a Brain"):
        profile(torch.nn.Linear(2, 2), stages=["train"])

    @profile
    def f():
        pass

    with pytest.raises(ConfigError, match="already decorated"):
        profile(f)


def test_generators_and_coroutines_are_refused_when_decorated():
    def gen():
        yield torch.ones(1)

    async def coroutine():
        return torch.ones(1)

    async def async_gen():
        yield torch.ones(1)

    for func, kind in ((gen, "a generator function"), (coroutine, "a coroutine function"),
                       (async_gen, "an async generator function")):
        for decorator in (profile, profile_optimiser, profile_analyst, profile(record_shapes=True)):
            with pytest.raises(sbprof.SbprofError, match=f"it is {kind}.*runs later"):
                decorator(func)


def test_profile_of_none_is_refused():
    for decorator in (profile, profile_optimiser, profile_analyst):
        with pytest.raises(ConfigError, match=r"\(None\): nothing to profile"):
            decorator(None)
    assert callable(profile(record_shapes=True)) and callable(profile_optimiser(active=2))  # the decorator forms


def test_reading_before_anything_ran_is_clear():
    model = profile(torch.nn.Linear(2, 2))
    with pytest.raises(sbprof.MeasurementError, match="nothing was profiled"):
        model.profiler.events()


# ---------------------------------------------------------------- modules and classes

def test_module_instance_steps_per_forward():
    model = profile(torch.nn.Linear(4, 4))
    for _ in range(3):
        model(torch.randn(2, 4))
    assert model.profiler.step_num == 3 and model.profiler.recorded_steps == 3
    assert len(model.profiler.step_wall_s["forward"]) == 3
    assert sum(e.count for e in model.profiler.key_averages() if e.key == "aten::linear") == 3


def test_class_decoration_profiles_only_its_instances():
    @profile
    class Net(torch.nn.Linear):
        pass

    net = Net(4, 4)
    net(torch.randn(1, 4))
    assert isinstance(net, torch.nn.Linear) and type(net).__name__ == "Net"
    assert net.profiler.step_num == 1
    plain = torch.nn.Linear(4, 4)
    assert not hasattr(plain, "profiler")


# ---------------------------------------------------------------- SpeechBrain Brain

def backward_ops(prof, stage=None):
    return sum(e.count for e in prof.events(stage).key_averages() if e.key.startswith("autograd::engine"))


def test_brain_profiles_training_not_validation_by_default():
    brain = profile(make_brain())
    t0 = time.perf_counter()
    brain.fit(range(2), data(6), data(2))
    fit_s = time.perf_counter() - t0
    prof = brain.profiler
    assert isinstance(prof, StepProfiler)
    # 2 epochs x 6 training batches, each one step; the 2 x 2 validation batches are left out
    assert prof.step_num == 12 and prof.recorded_steps == 12
    assert len(prof.step_wall_s["train"]) == 12 and "valid" not in prof.step_wall_s
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::mse_loss") == 12
    t0 = time.perf_counter()
    brain.evaluate(data(3))
    evaluate_s = time.perf_counter() - t0
    assert prof.step_num == 15 and len(prof.step_wall_s["test"]) == 3
    cpu_us, _ = report_time(brain)
    assert 0 < cpu_us <= (fit_s + evaluate_s) * 1e6
    assert sum(sum(v) for v in prof.step_wall_s.values()) <= fit_s + evaluate_s
    m = prof.measurement("train")
    assert m.summary("wall_s").count == 12 and m.summary("wall_s").median > 0


def test_brain_stages_chosen_by_the_user():
    brain = profile(make_brain(), stages=["train", "valid"])
    brain.fit(range(1), data(4), data(3))
    prof = brain.profiler
    assert prof.step_num == 7 and len(prof.step_wall_s["valid"]) == 3
    assert sum(e.count for e in prof.events("valid").key_averages() if e.key == "aten::mse_loss") == 3
    assert backward_ops(prof, "valid") == 0 < backward_ops(prof, "train")

    only_valid = profile(make_brain(), stages=["valid"])
    only_valid.fit(range(1), data(4), data(3))
    assert only_valid.profiler.step_num == 3 and list(only_valid.profiler.step_wall_s) == ["valid"]
    assert backward_ops(only_valid.profiler) == 0


def test_profile_optimiser_brain_records_only_active_training_steps():
    brain = profile_optimiser(make_brain())
    brain.fit(range(1), data(10), data(4))
    prof = brain.profiler
    assert prof.step_num == 10
    # default schedule: wait 1, warm-up 2, active 5 -> 5 of the 10 training steps recorded
    assert prof.recorded_steps == 5 and marker_steps(prof) == 5
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::mse_loss") == 5
    assert not prof.record_shapes and not prof.with_stack and not prof.with_flops and prof.profile_memory


def test_profile_analyst_on_instance_sets_detail():
    brain = profile_analyst(make_brain())
    brain.fit(range(1), data(8))
    prof = brain.profiler
    assert prof.record_shapes and prof.with_stack and prof.with_flops and prof.profile_memory
    # 5 recorded steps, each one Linear(16, 4) forward on 8 rows: 2 * 8 * 16 * 4 FLOPs
    assert sum(e.flops for e in prof.key_averages() if e.key == "aten::addmm") == 5 * 2 * 8 * 16 * 4


def test_decorated_brain_class_with_extra_schedule(tmp_path):
    @export(dir_name=str(tmp_path))
    @schedule(wait=0, warmup=1, active=2)
    @profile
    class ProfiledBrain(TinyBrain):
        pass

    brain = make_brain(ProfiledBrain)
    brain.fit(range(1), data(5))
    assert brain.profiler.step_num == 5 and brain.profiler.recorded_steps == 2
    assert list(tmp_path.glob("*.pt.trace.json"))


def test_speechbrain_profile_training_does_not_cut_training_short(tmp_path):
    # With --profile_training SpeechBrain would quit() after warm-up + steps (here 3).
    brain = profile(make_brain(output_folder=str(tmp_path), profile_training=True, profile_warmup=1,
                               profile_steps=2))
    brain.fit(range(2), data(6))
    assert brain.profiler.step_num == 12
    assert len(brain.profiler.step_wall_s["train"]) == 12
    # its tensorboard export is kept
    assert list((tmp_path / "profiler_logs").glob("*.pt.trace.json"))


def test_schedule_and_export_on_a_profiled_instance(tmp_path):
    brain = profile(make_brain(), stages=["train", "valid"])
    schedule(brain, wait=0, warmup=1, active=2)
    export(brain, dir_name=str(tmp_path))
    brain.fit(range(1), data(5), data(2))
    prof = brain.profiler
    assert prof.has_schedule and prof.step_num == 7  # the stage choice survives the rebuild
    # The new schedule governs, each stage on its own: train steps 2-3 and valid step 2; each batch one step
    assert prof.recorded_steps == 3 and prof.stage_steps == {"train": 5, "valid": 2}
    assert len(list(tmp_path.glob("*.pt.trace.json"))) == 2  # one recording per stage's cycle


# ---------------------------------------------------------------- SpeechBrain pretrained interface

@pytest.fixture(scope="module")
def encoder_asr(tmp_path_factory):
    from sbprof.models import load_local_model

    return load_local_model("encoder_asr", root=tmp_path_factory.mktemp("models"))


def test_profile_pretrained_interface_transcribe_batch(encoder_asr):
    from speechbrain.inference.ASR import EncoderASR

    asr = profile(encoder_asr)
    assert isinstance(asr, EncoderASR)
    wavs = torch.randn(2, 16000, generator=torch.Generator().manual_seed(0))
    lens = torch.ones(2)
    for _ in range(3):
        hyps = asr.transcribe_batch(wavs, lens)[0]
        assert len(hyps) == 2  # still returns its own result
    prof = asr.profiler
    # transcribe_batch calls encode_batch (also hooked): one step per call, not two
    assert prof.step_num == 3 and len(prof.step_wall_s["transcribe_batch"]) == 3
    assert "encode_batch" not in prof.step_wall_s
    keys = {e.key for e in prof.key_averages()}
    assert "aten::linear" in keys  # the Conformer's projections ran under the profiler
    cpu_us, _ = report_time(asr)
    assert 0 < cpu_us <= sum(prof.step_wall_s["transcribe_batch"]) * 1e6
