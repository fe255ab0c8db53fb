"""Real torchrun launches for the distributed tests: the environment, a free port, one or two node groups."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

SCRIPTS = Path(__file__).resolve().parent / "scripts"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(folder: Path, **more: str) -> Dict[str, str]:
    """One torch thread per rank (2 cores), rank files under ``folder/ranks``, sbprof importable."""
    env = dict(os.environ, OMP_NUM_THREADS="1", SBPROF_RANK_FOLDER=str(folder / "ranks"),
               SBPROF_MERGE_TIMEOUT_S="60", PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT),
                                                                                    os.environ.get("PYTHONPATH")))))
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env.update(more)
    return env


def torchrun(args: List[str]) -> List[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def run(command: List[str], cwd: Path, env: Dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def two_node_groups(script: List[str], cwd: Path, env: Dict[str, str], timeout: float = 240) -> List[int]:
    """Two torchrun node groups of one rank each on localhost (``--nnodes=2 --node_rank=0|1``): their exit codes."""
    endpoint = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen(torchrun(["--nnodes=2", "--nproc_per_node=1", f"--node_rank={n}",
                                        f"--rdzv_endpoint={endpoint}", "--max_restarts=0", *script]),
                              cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for n in (0, 1)]
    codes = []
    for proc in procs:
        out, _ = proc.communicate(timeout=timeout)
        (cwd / f"node{len(codes)}.log").write_text(out)
        codes.append(proc.returncode)
    return codes
