"""Analysis once, then the renderers: how every job's reports are written, measured now or saved long ago.

:func:`reports` turns a :class:`~sbprof.results.Results` into the job's summary
(its ``analyse``) and hands that one object to the job's renderer, whose files
:func:`write_files` writes; a write that fails (a full disk) is one line.
:func:`sbprof.jobs.registry.render_only` re-renders a saved folder.
"""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Dict, Optional, Union

from sbprof.jobs.job import Job
from sbprof.record.codec import to_json
from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import what_is_there
from sbprof.results import RESULTS_FILE, Results, StorageError
from sbprof.results.files import DISK_FULL, atomic_write


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


def summary_block(job: Job, results: Results) -> Dict[str, Any]:
    """The ``summary`` block of ``results.json``: the job's own figures for readers without sbprof, and the
    report's verdicts ("What limits this", ``limits``) as the analysis computed them."""
    block = dict(job.summarise(results)) if job.summarise is not None else {}
    limits = getattr(job.analyse(results), "limits", None)
    if limits is not None:
        block["limits"] = to_json(limits)
    return block


def reports(job: Job, results: Results, folder: Union[str, Path]) -> Dict[str, Path]:
    """Analyse ``results`` once, render the job's files from that summary and write them into ``folder``.

    A record the analysis refuses (a payload a hand edit broke) is named with the file it came from.
    """
    try:
        files = job.render(job.analyse(results))
    except ConfigError as exc:
        where, said = str(Path(folder) / RESULTS_FILE), str(exc)
        if where in said:
            raise
        raise ConfigError(f"{where}: {said.removeprefix(RESULTS_FILE + ': ')}") from None  # the file named once
    try:
        return write_files(files, folder)
    except OSError as exc:
        blocked = in_the_way(Path(folder), files)
        if blocked is not None:  # named, not taken for a disk's trouble ("File exists", "Not a directory")
            raise StorageError(f"cannot write the reports in {folder}: {blocked}; move it away, then 'sbprof "
                               f"{job.name} --render-only {folder}' writes them (results.json keeps every finished "
                               "record)") from None
        raise StorageError(f"cannot write the reports in {folder}: {exc.strerror or exc}; results.json keeps every "
                           f"finished record: {_advice(job, exc, folder)}") from None


def in_the_way(folder: Path, names: Files) -> Optional[str]:
    """What stands where a report goes, in words: a sub-folder's place (``plots/``) taken by a file, a FIFO or a
    link loop, or a report's own place taken by a folder; ``None`` when nothing does.

    Example
    -------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()); _ = (folder / "plots").write_text("x")
    >>> in_the_way(folder, {"report.md": "", "plots/a.png": b""}) == f"{folder / 'plots'} is a regular file, where a folder of the reports goes"
    True
    """
    for name in names:
        path = folder / name
        for part in reversed(path.relative_to(folder).parents[:-1]):
            there = what_is_there(folder / part)
            if there not in ("a folder", "nothing"):
                return f"{folder / part} is {there}, where a folder of the reports goes"
        there = what_is_there(path)
        if there == "a folder":
            return f"{path} is a folder, where a report goes"
    return None


def _advice(job: Job, exc: OSError, folder: Union[str, Path]) -> str:
    """What to do when the reports could not be written: a full disk is not a read-only folder.

    Example
    -------
    >>> import errno
    >>> from sbprof.script import JOB
    >>> _advice(JOB, OSError(errno.EROFS, "Read-only file system"), "out")
    "the folder cannot be written (read-only or not yours): copy it somewhere writable and run 'sbprof run --render-only' on the copy"
    """
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"the folder cannot be written (read-only or not yours): copy it somewhere writable and run "
                f"'sbprof {job.name} --render-only' on the copy")
    if exc.errno in DISK_FULL and job.resumes:
        return ("free some space and run the same command again (a run goes on where it stopped, then writes the "
                "reports; --render-only writes the reports alone)")
    fix = "free some space" if exc.errno in DISK_FULL else "once that is fixed"
    return f"{fix}, 'sbprof {job.name} --render-only {folder}' writes the reports"
