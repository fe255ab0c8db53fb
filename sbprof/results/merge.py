"""Results folders of several machines, found, loaded and labelled for a merged report.

Nothing is pooled across machines: every figure of a merged report is
computed from one machine's records (:mod:`sbprof.analysis.machines`). The
folders must hold results of one job that merges (``profile`` or
``compare-models``); each machine is labelled by its host name, or by its
folder's name when two folders come from one host.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Union

from sbprof.base.errors import ConfigError
from sbprof.record.results import Machine
from sbprof.results.store import RESULTS_FILE, load_results

MERGED_JOBS = ("profile", "compare-models")
"""Jobs whose results several machines can put side by side."""


def load_machines(folders: Sequence[Union[str, Path]]) -> List[Machine]:
    """Load each folder's ``results.json`` and label it by machine.

    Raises
    ------
    ConfigError
        Fewer than two folders, a folder given twice, an unreadable file,
        results of a job that does not merge, or of different jobs.

    Example
    -------
    >>> import tempfile, pathlib
    >>> from sbprof.results import ResultStore, Results
    >>> a, b = pathlib.Path(tempfile.mkdtemp()), pathlib.Path(tempfile.mkdtemp())
    >>> _ = ResultStore(a, Results("compare-models", machine={"hostname": "gpu-box"})).save()
    >>> _ = ResultStore(b, Results("compare-models", machine={"hostname": "laptop"})).save()
    >>> [m.label for m in load_machines([a, b])]
    ['gpu-box', 'laptop']
    """
    paths = [Path(f) for f in folders]
    if len(paths) < 2:
        raise ConfigError(f"merging needs at least two results folders, got {len(paths)}")
    loaded = [load_results(p) for p in paths]  # first: a link loop, a FIFO or a folder is named as such
    resolved = [(p / RESULTS_FILE if p.is_dir() else p).resolve() for p in paths]
    twice = sorted({str(p) for p in resolved if resolved.count(p) > 1})
    if twice:
        raise ConfigError(f"results given twice: {', '.join(twice)}")
    for path, results in zip(paths, loaded):
        if results.job not in MERGED_JOBS:
            raise ConfigError(f"{path}: holds results of 'sbprof {results.job}'; merge puts results of "
                              f"{' or '.join(MERGED_JOBS)} side by side")
    jobs = sorted({r.job for r in loaded})
    if len(jobs) > 1:
        raise ConfigError(f"cannot merge different kinds of results ({', '.join(jobs)}): give folders of one kind")
    hosts = [r.machine.get("hostname") or p.resolve().name for r, p in zip(loaded, paths)]
    labels = []
    for host, path in zip(hosts, paths):
        folder = (path if path.is_dir() else path.parent).resolve().name
        labels.append(f"{host} ({folder})" if hosts.count(host) > 1 else host)
    if len(set(labels)) < len(labels):  # one host and one folder name twice: number them
        labels = [f"{label} #{i + 1}" for i, label in enumerate(labels)]
    return [Machine(label, path, results) for label, path, results in zip(labels, paths, loaded)]
