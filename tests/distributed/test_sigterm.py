"""A rank stopped by SIGTERM (torchrun's way of stopping the others when one fails) still closes its file."""
import os
import signal
import subprocess
import sys

from sbprof.distributed.merge import merge_run
from sbprof.distributed.rankfile import rank_file, read_rank_file
from torchrun_tools import rank_env

SCRIPT = """
import time, torch
from sbprof import profile_optimiser

@profile_optimiser(wait=0, warmup=1, active=10_000)
def step():
    torch.ones(1000).sum()
    time.sleep(0.01)

for i in range(10_000):
    step()
    if i == 5:
        print("ready", flush=True)
"""


def test_sigterm_writes_the_records_and_the_end_line_then_stops(tmp_path):
    # A world of one without torchrun's store: the run id comes from $SBPROF_RUN_ID.
    env = rank_env(tmp_path, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", SBPROF_RUN_ID="stopped")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    rank = read_rank_file(rank_file(tmp_path / "ranks" / "stopped", 0))
    assert rank.end["reason"] == "SIGTERM" and rank.header["backend"] == "none"
    record = rank.records["step"]
    assert len(record["wall_s"]) == rank.end["last_step"] >= 5  # step 0 was the warm-up
    assert all(w >= 0.01 for w in record["wall_s"]) and record["extra"]["rank"]["comm_s"] == [0.0] * len(
        record["wall_s"])
    summary = merge_run(tmp_path / "ranks" / "stopped")
    assert not summary.complete and [r.ended for r in summary.stopped_early] == ["SIGTERM"]
    assert not os.path.exists(tmp_path / "sbprof-ranks")
