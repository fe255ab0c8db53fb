"""Test helpers: the benchmark's worker run by the core's supervisor, and a second interpreter made on the spot."""
from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from sbprof.workers.supervisor import Supervisor, WorkerJob

KILL_SWITCH = "SBPROF_TEST_KILL_ON_BACKWARD"
"""Set in the environment, it makes the second interpreter's workers die (SIGKILL) in their first backward()."""

_KILL_HOOK = f"""
import os
if os.environ.get({KILL_SWITCH!r}):
    import signal, torch
    torch.Tensor.backward = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
"""


def run_items(python: str, backend: str, items: List[Dict[str, Any]], log_path: Path,
              env: Optional[Dict[str, str]] = None, **job: Any) -> Tuple[List[dict], Dict[int, dict], Dict[int, str]]:
    """Run ``items`` of ``backend`` in the worker: (loaded events, results by item, crash messages by item)."""
    payload = {"backend": backend, "device": "cpu", "threads": 1, "vocab_size": 50, "joiner_dim": 8, "blank": 0,
               "seed": 0, "output_folder": str(log_path.parent), "items": items, **job}
    loaded: List[dict] = []
    results: Dict[int, dict] = {}
    crashes: Dict[int, str] = {}
    worker = WorkerJob(module="sbprof.transducer.worker", payload=payload, n_items=len(items), name="test worker",
                       log_path=log_path, python=python, env=env or {})
    Supervisor(worker, results.__setitem__, crashes.__setitem__, loaded.append).run()
    return loaded, results, crashes


def one_step_item(backend: str) -> Dict[str, Any]:
    """One measured step of one utterance: the least a worker can be asked (its setup runs the check)."""
    return {"cell": {"model": backend, "params": {"mode": "fixed"}}, "label": backend, "settings": {},
            "kind": "measure", "unmeasured": 0, "steps": [[[4, 2]]], "padding": {}, "step_shapes": [[1, 4, 2]]}


def make_second_python(folder: Path) -> Path:
    """A bare venv that reaches this interpreter's packages through a .pth file (and holds the kill hook)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "reach_parent.pth").write_text("\n".join(site.getsitepackages()) + "\nimport kill_hook\n")
    Path(purelib, "kill_hook.py").write_text(_KILL_HOOK)
    return python
