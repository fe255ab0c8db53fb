"""Running ``python -m sbprof run`` as a user does, in a fresh process, and reading what it wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

from helpers.signals import default_sigint

ROOT = Path(__file__).resolve().parents[2]
RECIPES = Path(__file__).resolve().parent / "recipes"
BRAIN = RECIPES / "brain"
LOOP = RECIPES / "loop" / "train.py"
TINY = RECIPES / "loop" / "tiny_ops.py"
LBFGS = RECIPES / "loop" / "lbfgs.py"
INFER = RECIPES / "infer" / "transcribe.py"


CACHE = Path(tempfile.gettempdir()) / f"sbprof-test-cache-{os.getuid()}"


def env() -> Dict[str, str]:
    """This checkout first on the path (also for the script's own imports), one thread per pool, and a cache of the
    tests' own (the peak FLOP/s probe runs once for all of them, and never writes to the user's cache)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "XDG_CACHE_HOME": str(CACHE)}


def sbprof_run(args: List[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    # A script may send itself SIGINT: its default action restored first (see tests/helpers/signals.py).
    return subprocess.run([sys.executable, "-m", "sbprof", "run", *args], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=timeout, preexec_fn=default_sigint)


def plain_run(args: List[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


def peak_rss_run(args: List[str], cwd: Path, timeout: float = 240) -> Tuple[subprocess.CompletedProcess, int]:
    """``python ARGS`` in a fresh process, and its own peak resident set in bytes (the kernel's ``ru_maxrss`` of
    that child, from ``wait4``: an outside reading, not sbprof's)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env(), stdout=out, stderr=err, text=True,
                                preexec_fn=default_sigint)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, proc.returncode, out.read(), err.read()), usage.ru_maxrss * 1024


def records(folder: Path) -> Dict[str, Dict[str, Any]]:
    """The run's records by stage."""
    data = json.loads((folder / "results.json").read_text())
    return {r["cell"]["variant"]: r for r in data["records"]}


def measured(record: Dict[str, Any], key: str) -> List[Any]:
    """The measured steps' values of one of the per-step lists of ``extra`` (warm-up ones left out)."""
    warmup = record["warmup"]
    return record["extra"][key][warmup:warmup + len(record["wall_s"])]


def brain_args(out: Path, *more: str) -> List[str]:
    return [str(BRAIN / "train.py"), str(BRAIN / "hparams.yaml"), "--output_folder", str(out), *more]
