"""sbprof run under real torchrun (2 ranks, gloo, one thread each): each rank profiles itself, rank 0 merges."""
from __future__ import annotations

import os
import sys

import pytest

from run_helpers import BRAIN, RECIPES, env, measured, records

pytestmark = pytest.mark.slow


def test_two_ranks_each_profile_themselves_and_the_run_is_merged(tmp_path):
    import subprocess

    from sbprof.distributed.merge import find_run, merge_run
    from sbprof.distributed.rankfile import rank_files, read_rank_file

    out = tmp_path / "out"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--max_restarts=0", "-m",
               "sbprof", "run", "--output_folder", str(out), str(RECIPES / "ddp" / "train.py"),
               str(BRAIN / "hparams.yaml"), "--output_folder", str(tmp_path / "recipe"), "--distributed_backend",
               "gloo"]
    ranks_env = {**env(), "SBPROF_MERGE_TIMEOUT_S": "60"}
    for key in ("RANK", "WORLD_SIZE", "SBPROF_RANK_FOLDER"):
        ranks_env.pop(key, None)
    done = subprocess.run(command, cwd=tmp_path, env=ranks_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):  # each rank's own report, every stage in it
        assert list(records(out / f"rank{rank}")) == ["train", "valid", "test"]
    summary = merge_run(find_run(out / "ranks"))
    assert summary.complete and summary.world_size == 2 and summary.backend == "gloo"
    assert {s.key for s in summary.sections} == {"train.py/train", "train.py/valid", "train.py/test"}
    for section in summary.sections:
        assert [r.rank for r in section.rows] == [0, 1]
    # The rank files hold the same measured steps as each rank's own results (one clock, two writers), with their
    # data wait, batches and communication: the merged figures are the ranks' own.
    for path in rank_files(find_run(out / "ranks")):
        rank = read_rank_file(path)
        for stage in ("train", "valid", "test"):
            own, record = records(out / f"rank{rank.rank}")[stage], rank.records[f"train.py/{stage}"]
            assert record["wall_s"] == own["wall_s"]
            assert record["extra"]["data_wait_s_per_step"] == measured(own, "data_wait_s")
            assert record["extra"]["audio_s_per_step"] == measured(own, "audio_s")
        assert all(c > 0 for c in rank.records["train.py/train"]["extra"]["rank"]["comm_s"])  # DDP's all-reduce
    train = next(s for s in summary.sections if s.key == "train.py/train")
    assert train.throughput is not None and train.cpu_cost is not None and train.crowding is not None
    merged = os.listdir(find_run(out / "ranks"))
    assert "report.md" in merged  # rank 0 ran sbprof merge on the run's folder
