"""CUDA ground truth of distributed training: ``torchrun -m sbprof train`` on NCCL, world size 1 (and 2 where the
machine has two GPUs: NCCL runs one rank per GPU). Communication is read from the NCCL kernels of each rank's
profile: the test reads the rank's exported trace itself and asks that communication was found exactly when NCCL
kernels ran in the measured steps' trace; rank 0's merged report must be written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.gpu_truths import Figure, check, keep_report
from helpers.train_tiny import tiny_overrides
from sbprof.distributed.merge import find_run
from sbprof.distributed.rankfile import rank_files, read_rank_file
from torchrun_tools import rank_env, run, torchrun

pytestmark = pytest.mark.cuda


def nccl_kernels(folder: Path) -> int:
    """NCCL kernels in every exported trace under ``folder`` (read here from the chrome traces' JSON)."""
    count = 0
    for path in folder.rglob("*.pt.trace.json"):
        events = json.loads(path.read_text()).get("traceEvents", [])
        count += sum(1 for e in events if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
    return count


@pytest.mark.parametrize("world", [1, 2])
def test_torchrun_on_nccl_reads_communication_from_nccl_kernels_and_merges(tmp_path, world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"world size {world} needs {world} GPUs (NCCL runs one rank per GPU); this machine has "
                    f"{torch.cuda.device_count()}")
    config = tmp_path / "train.yaml"
    tree = tiny_overrides(tmp_path / "out", variants=["ctc"], devices="cuda", scaling=["weak"],
                          profiling={"export_trace": True, "memory": False, "flops": False})
    config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in tree.items()))
    done = run(torchrun(["--standalone", f"--nproc_per_node={world}", "-m", "sbprof", "train", str(config),
                         "--noprogressbar"]), cwd=tmp_path, env=rank_env(tmp_path), timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    run_folder = find_run(tmp_path / "out" / "ranks")
    assert any(run_folder.glob("*.md")), sorted(p.name for p in run_folder.iterdir())  # rank 0's merged report
    for report in run_folder.glob("*.md"):
        keep_report(f"torchrun-nccl-world{world}", report)
    for path in rank_files(run_folder):
        rank = read_rank_file(path)
        (section,) = rank.records.values()
        assert section["settings"]["distributed"]["backend"] == "nccl"
        comm = sum(section["extra"]["rank"]["comm_s"])
        kernels = nccl_kernels(tmp_path / "out")
        check(Figure(f"torchrun world {world} on NCCL, rank {rank.rank}: communication read from NCCL kernels",
                     f"{comm * 1e3:.3f} ms over the measured steps", f"{kernels} NCCL kernels in the exported traces",
                     "consistent" if (comm > 0) == (kernels > 0) else "inconsistent", (comm > 0) == (kernels > 0)))
