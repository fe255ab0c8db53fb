"""Analysis once, then the renderers: how every job's reports are written, measured now or saved long ago.

:func:`reports` turns a :class:`~sbprof.results.Results` into the job's summary
(its ``analyse``) and hands that one object to the job's renderers; a write
that fails (a full disk) is one line. :func:`render_only` re-renders a saved
folder without measuring: the job comes from the file's ``job``, and a
folder written by another job than the command names is refused.
"""
from __future__ import annotations

import os

from pathlib import Path
from typing import Dict, Optional, Union

from sbprof.jobs.registry import JobEntry, get_job
from sbprof.results import RESULTS_FILE, Results, StorageError, load_results
from sbprof.base.errors import ConfigError


def reports(entry: JobEntry, results: Results, folder: Union[str, Path]) -> Dict[str, Path]:
    """Analyse ``results`` once and write the job's reports into ``folder``; return what was written."""
    summary = entry.load("analyse")(results)
    try:
        return entry.load("render")(summary, Path(folder))
    except OSError as exc:
        raise StorageError(f"cannot write the reports in {folder}: {exc.strerror or exc}; results.json keeps every "
                           "finished record: free some space and run the same command again (a run goes on where "
                           "it stopped, then writes the reports; --render-only writes the reports alone)") from None


def render_only(target: Union[str, Path], job: Optional[str] = None) -> Dict[str, Path]:
    """Re-render a saved ``results.json`` (or its folder) next to it, measuring nothing.

    Arguments
    ---------
    target : str or Path
        A results folder or its ``results.json``.
    job : str, optional
        The command asking (``profile``...): a folder of another job is refused, naming the right command.
        ``None``: whatever job wrote the folder.

    Raises
    ------
    ConfigError
        Not a results folder, a file of another job, an unknown job or a newer format.
    StorageError
        The reports could not be written.
    """
    path = Path(target)
    if not os.path.lexists(path):  # a link loop or a dangling link goes on, to be named by load_results
        raise ConfigError(f"{target}: no such results folder or file")
    results = load_results(path, job=job)
    try:
        entry = get_job(results.job)
    except ConfigError:
        raise ConfigError(f"{path if path.is_file() else path / RESULTS_FILE}: written by an unknown job "
                          f"{results.job!r}; this sbprof renders jobs of its own only") from None
    return reports(entry, results, path if path.is_dir() else path.parent)
