"""The decorators' modules= option: a Brain's steps attributed, light or detailed, hooks gone after fit."""
import pytest
import speechbrain as sb
import torch

from helpers.decorator_brains import data
from modules_models import Sleeper
from sbprof import profile
from sbprof.base.errors import ConfigError
from sbprof.measuring.modules import ModuleAttribution

SLEEP_S = 0.02


class TwoPartBrain(sb.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.head(self.modules.body(batch[0]))

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])


def make_brain(tmp_path):
    torch.manual_seed(0)
    modules = {"body": Sleeper(torch.nn.Linear(16, 16), SLEEP_S, SLEEP_S), "head": torch.nn.Linear(16, 4)}
    return TwoPartBrain(modules, lambda p: torch.optim.SGD(p, lr=0.01),
                        run_opts={"device": "cpu", "noprogressbar": True}, hparams={"output_folder": str(tmp_path)})


def test_light_mode_on_a_brain_times_each_training_batch(tmp_path):
    brain = profile(make_brain(tmp_path), activities=(), modules=["body", "head"])
    brain.fit(range(1), data(4))
    b = brain.profiler.modules.breakdown("train")
    assert b.steps == 4 and b.mode == "light"
    assert SLEEP_S * 1e3 <= b.row("body").forward_ms <= SLEEP_S * 1e3 + 10
    assert SLEEP_S * 1e3 <= b.row("body").backward_ms <= SLEEP_S * 1e3 + 10
    assert b.row("optimizer").calls == 1  # the Brain's optimiser, made when fit started
    # the attribution's step and the decorator's step time the same batches
    walls = brain.profiler.measurement("train").wall_s
    assert abs(sum(walls) * 1e3 / 4 - b.step_ms) < 0.1 * b.step_ms
    assert all(not m._forward_hooks for m in brain.modules.modules())


def test_detailed_mode_labels_the_profile(tmp_path):
    brain = profile(make_brain(tmp_path), modules="default")
    brain.fit(range(1), data(2))
    keys = {e.key for e in brain.profiler.key_averages()}
    assert {"sbprof.forward:body", "sbprof.backward:head", "sbprof.optimizer:SGD"} <= keys
    assert brain.profiler.modules.mode == "detailed"


def test_a_function_takes_a_ready_attribution():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    attribution = ModuleAttribution(model, modules="0")

    @profile(activities=(), modules=attribution)
    def train_step(x):
        model(x).sum().backward()

    for _ in range(3):
        train_step(torch.randn(2, 4))
    assert attribution.breakdown("train_step").steps == 3 and not model[0]._forward_hooks
    with pytest.raises(ConfigError, match="needs a ready sbprof.measuring.modules.ModuleAttribution"):
        profile(lambda: None, modules="default")
