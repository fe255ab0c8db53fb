"""``sbprof run --ddp``: the process group started before the script, SpeechBrain's own start made a no-op, the
Brain's backend defaulted only where the script sets none; bad input refused in one line.

In this process, as a world of one rank (a real gloo group on localhost, real SpeechBrain Brains); the torchrun
launch of an unedited Brain is in tests/distributed/test_torchrun_run.py.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist

from run_helpers import LOOP, sbprof_run
from sbprof.base.errors import ConfigError
from sbprof.script.command import load_config
from sbprof.script.ddp import Ddp
from test_run_bad_input import _refused


@pytest.fixture
def world_of_one(monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    assert not dist.is_initialized()
    original = dist.init_process_group
    ddp = Ddp("gloo").install()
    yield ddp
    ddp.remove()
    assert not dist.is_initialized() and dist.init_process_group is original  # the group and the patches gone


def brain(run_opts=None, hparams=None):
    import speechbrain as sb

    return sb.Brain({"model": torch.nn.Linear(2, 2)}, lambda p: torch.optim.SGD(p, lr=0.1), hparams, run_opts)


def test_the_group_is_started_and_the_scripts_own_start_returns_at_once(world_of_one):
    from speechbrain.utils.distributed import ddp_init_group
    from speechbrain.utils.run_opts import RunOptions

    assert world_of_one.started and dist.is_initialized() and dist.get_backend() == "gloo"
    ddp_init_group(RunOptions())  # its default backend is nccl: without --ddp this stops on a CPU machine
    dist.init_process_group("gloo")
    dist.init_process_group()
    with pytest.raises(ValueError, match="already started the process group.*give --ddp nccl"):
        dist.init_process_group("nccl")
    assert dist.get_world_size() == 1 and dist.get_backend() == "gloo"


def test_the_brain_gets_the_backend_only_where_the_script_sets_none(world_of_one):
    from speechbrain.utils.run_opts import RunOptions

    assert brain({"device": "cpu"}).distributed_backend == "gloo"
    assert brain(None).distributed_backend == "gloo"
    parsed = RunOptions.from_dictionary({"device": "cpu"})  # as sb.parse_arguments gives it
    assert brain(parsed).distributed_backend == "gloo" and parsed.distributed_backend == "nccl"  # not edited
    assert brain({"device": "cpu", "distributed_backend": "mpi"}).distributed_backend == "mpi"
    assert brain(dataclasses.replace(parsed, distributed_backend="mpi", overridden_args={"distributed_backend"})
                 ).distributed_backend == "mpi"
    assert brain({"device": "cpu"}, {"distributed_backend": "mpi"}).distributed_backend == "mpi"


@pytest.mark.parametrize("env, backend, words", [
    ({}, "gloo", "--ddp starts the process group of a torchrun launch, but RANK and WORLD_SIZE are not set"),
    ({"RANK": "0", "WORLD_SIZE": "1"}, "mpi", "--ddp mpi: unknown backend; give one of gloo, nccl"),
])
def test_bad_ddp_input_is_one_clear_error(monkeypatch, env, backend, words):
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as error:
        load_config({"script": str(LOOP), "ddp": backend})
    assert str(error.value).startswith(words)


@pytest.mark.skipif(torch.cuda.device_count() > 0, reason="a machine with a GPU can start NCCL")
def test_nccl_without_a_gpu_is_refused_on_the_command_line(tmp_path, monkeypatch):
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(key, value)  # as torchrun sets them (the command's environment is this one)
    done = sbprof_run(["--ddp", "nccl", "--output_folder", str(tmp_path / "out"), str(LOOP)], cwd=tmp_path)
    _refused(done, tmp_path, "--ddp nccl needs a GPU per local rank")


INTERLEAVED = """
import sys, torch, speechbrain as sb
class Brain(sb.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch.x.data)
    def compute_objectives(self, predictions, batch, stage):
        return predictions.pow(2).mean()
items = lambda n: [{"id": str(i), "x": torch.ones(4)} for i in range(n)]
loader = {"batch_size": 2, "collate_fn": sb.dataio.batch.PaddedBatch}
brain = Brain({"model": torch.nn.Linear(4, 2)}, lambda p: torch.optim.SGD(p, lr=0.1), {}, {"device": "cpu"})
brain.fit(range(1, 5), items(2), items(6), train_loader_kwargs=loader, valid_loader_kwargs=loader)
"""


@pytest.mark.slow
def test_a_stage_after_another_stages_unrecorded_steps_has_no_time_between_steps(tmp_path, monkeypatch):
    # One training batch and three validation batches an epoch: validation's 3 recorded steps end in epoch 1, then
    # its steps are counted, not written; each training step still follows validation steps, never another
    # training step, so none has a time between steps of its own.
    import socket

    from sbprof.distributed.merge import find_run
    from sbprof.distributed.rankfile import rank_files, read_rank_file

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "SBPROF_RUN_ID": "interleaved"}.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "fit.py").write_text(INTERLEAVED)
    done = sbprof_run(["--ddp", "gloo", "--continue", "--warmup", "0", "--measured", "3", "--output_folder",
                       str(tmp_path / "out"), "fit.py"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = read_rank_file(rank_files(find_run(tmp_path / "out" / "ranks"))[0], steps=True).steps
    # Every recorded step goes to the rank file (measured, then the memory, per-module and traced ones): one
    # training step an epoch, four epochs; validation's three an epoch, the first of each after a training step.
    assert [line["gap_s"] for line in steps["fit.py/train"]] == [None] * 4
    valid = [line["gap_s"] is None for line in steps["fit.py/valid"]]
    assert len(valid) > 3 and valid == [i % 3 == 0 for i in range(len(valid))], valid
