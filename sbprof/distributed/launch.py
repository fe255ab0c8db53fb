"""Starting a world of ranks on this machine with torchrun's own entry point, under a deadline.

sbprof writes no launcher: a ``world_sizes`` study runs ``python -m
torch.distributed.run --standalone --nproc_per_node=N`` (torchrun: its
rendezvous on a free local port, its agent supervising the ranks, stopping
them all when one fails) with the rank program as a module. What sbprof adds
is a deadline: a world still running when it passes is stopped (SIGTERM to
torchrun's process group, which stops its ranks; SIGKILL after a grace
period) and reported as timed out; each rank's file then says where it was.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

GRACE_S = 15.0
"""How long torchrun gets to stop its ranks after SIGTERM before everything is killed."""


def torchrun_command(nproc: int, module: str, args: Sequence[str]) -> List[str]:
    """The torchrun command line that runs ``python -m module args`` as ``nproc`` ranks on this machine.

    Example
    -------
    >>> torchrun_command(2, "sbprof", ["train", "world.yaml"])[2:]
    ['torch.distributed.run', '--standalone', '--nnodes=1', '--nproc_per_node=2', '--max_restarts=0', '-m', \
'sbprof', 'train', 'world.yaml']
    """
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc_per_node={nproc}",
            "--max_restarts=0", "-m", module, *args]


@dataclass(frozen=True)
class Launch:
    """How one world's launch ended: torchrun's exit code (``None`` when stopped at the deadline) and its wall time."""

    command: List[str]
    exit_code: "int | None"
    wall_s: float
    timed_out: bool


def run_world(command: List[str], env: Dict[str, str], timeout_s: float, log_path: Path) -> Launch:
    """Run a torchrun command to its end or to the deadline (see the module docstring); output to ``log_path``."""
    from sbprof.workers.supervisor import child_env

    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = child_env(env)
    start = time.perf_counter()
    with open(log_path, "a") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        proc = subprocess.Popen(command, stdout=log, stderr=log, env=full_env, start_new_session=True,
                                preexec_fn=_stop_with_parent)
        try:
            code = proc.wait(timeout=timeout_s)
            return Launch(command, code, time.perf_counter() - start, False)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return Launch(command, None, time.perf_counter() - start, True)
        except BaseException:
            _stop(proc)
            raise


def _stop_with_parent() -> None:
    """In the child: Linux sends torchrun SIGTERM if the process that launched it dies (no orphaned world)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to torchrun's whole process group (it stops its ranks), SIGKILL after :data:`GRACE_S`."""
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
