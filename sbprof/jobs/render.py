"""Analysis once, then the renderers: how every job's reports are written, measured now or saved long ago.

:func:`reports` turns a :class:`~sbprof.results.Results` into the job's summary
(its ``analyse``) and hands that one object to the job's renderers; a write
that fails (a full disk) is one line. :func:`render_only` re-renders a saved
folder without measuring: the job comes from the file's ``job``, and a
folder written by another job than the command names is refused.
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Dict, Optional, Union

from sbprof.jobs.registry import JobEntry, get_job
from sbprof.results import RESULTS_FILE, Results, StorageError, load_results
from sbprof.results.files import atomic_write
from sbprof.base.errors import ConfigError


Files = Dict[str, Union[str, bytes]]
"""What a renderer returns: each file's name relative to the results folder (``report.md``, ``plots/x.png``) and
its content, in the order they are listed."""


def write_files(files: Files, folder: Union[str, Path]) -> Dict[str, Path]:
    """Write each rendered file under ``folder`` atomically (readers see the old file or the new one).

    Example
    -------
    >>> import tempfile
    >>> written = write_files({"report.md": "# r\\n", "plots/a.png": b"\\x89PNG"}, tempfile.mkdtemp())
    >>> sorted(written), written["plots/a.png"].read_bytes()
    (['plots/a.png', 'report.md'], b'\\x89PNG')
    """
    written = {}
    for name, content in files.items():
        path = Path(folder) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, content)
        written[name] = path
    return written


def reports(entry: JobEntry, results: Results, folder: Union[str, Path]) -> Dict[str, Path]:
    """Analyse ``results`` once, render the job's files from that summary and write them into ``folder``."""
    summary = entry.load("analyse")(results)
    render = entry.load("render")
    try:
        if len(inspect.signature(render).parameters) == 2:  # TRANSITION: a renderer that still writes its files
            return render(summary, Path(folder))
        return write_files(render(summary), folder)
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
