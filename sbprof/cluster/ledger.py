"""The batches a run sent to a cluster and has not collected yet, kept in its output folder (atomically).

A driver killed mid-sweep (SIGKILL included) leaves its Slurm jobs running;
the next run of the same command reads this file, takes each job over (its
events file says what it measured so far, ``offset`` how much of it was
saved already), waits for it, and only then lets the plan send what is
still missing: no cell is measured twice and no record is lost. An entry is
written *before* its job is submitted (with the job name it gets), so a
kill between the two is found by that name; it is removed once collected.

Example
-------
>>> import tempfile
>>> ledger = Ledger(tempfile.mkdtemp())
>>> ledger.add({"token": "ab12", "job": None, "offset": 0})
>>> ledger.update("ab12", job="17"); [e["job"] for e in Ledger(ledger.path.parent).entries()]
['17']
>>> ledger.remove("ab12"); Ledger(ledger.path.parent).entries()
[]
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Union

from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import read_input_file
from sbprof.base.atomic import atomic_write

LEDGER_FILE = "cluster-jobs.json"
MAX_LEDGER_BYTES = 64 * 2**20


class Ledger:
    """The entries (one per batch sent) of ``<folder>/cluster-jobs.json``, each a JSON mapping with a ``token``."""

    def __init__(self, folder: Union[str, Path]):
        self.path = Path(folder) / LEDGER_FILE
        self._entries: Dict[str, Dict[str, Any]] = {}
        if self.path.exists():
            raw = read_input_file(self.path, MAX_LEDGER_BYTES, "file of cluster jobs")
            try:
                data = json.loads(raw)
                self._entries = {e["token"]: e for e in data["jobs"]}
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{self.path}: not a readable file of cluster jobs; the jobs it listed may still be "
                                  "running: cancel them (squeue --me) and move the file away") from None

    def entries(self) -> List[Dict[str, Any]]:
        return [dict(e) for e in self._entries.values()]

    def add(self, entry: Dict[str, Any]) -> None:
        self._entries[entry["token"]] = dict(entry)
        self._save()

    def update(self, token: str, **fields: Any) -> None:
        self._entries[token].update(fields)
        self._save()

    def remove(self, token: str) -> None:
        if self._entries.pop(token, None) is not None:
            self._save()

    def _save(self) -> None:
        atomic_write(self.path, json.dumps({"jobs": list(self._entries.values())}, indent=1) + "\n")
