"""Analysis once, then the renderers: how every job's reports are written, measured now or saved long ago.

:class:`Reporting` is what the runner does at each checkpoint (after a saved
batch, and when the run stops): it turns a :class:`~sbprof.results.Results`
into the job's summary (its ``analyse``, called once) and hands that one
object to ``results.json``'s summary block (:func:`summary_block`) and to the
job's renderer, whose files :func:`write_files` writes; a write that fails (a
full disk) is one line. :func:`reports` does the same for a saved folder
(:func:`sbprof.registry.render_only`), whose results.json it leaves as it is.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from sbprof.jobs.job import Job
from sbprof.record.codec import to_json
from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import what_is_there
from sbprof.results import RESULTS_FILE, Results, StorageError
from sbprof.base.atomic import atomic_write
from sbprof.results.files import DISK_FULL


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


def summary_block(job: Job, summary: Any) -> Dict[str, Any]:
    """The ``summary`` block of ``results.json``, from the job's analysis ``summary`` (the one its reports show):
    the job's own figures for readers without sbprof, and the report's verdicts ("What limits this", ``limits``).

    Example
    -------
    >>> from sbprof.script import JOB
    >>> summary_block(JOB, object())
    {}
    """
    block = dict(job.summarise(summary)) if job.summarise is not None else {}
    limits = getattr(summary, "limits", None)
    if limits is not None:
        block["limits"] = to_json(limits)
    return block


@dataclass(frozen=True)
class Reporting:
    """The runner's checkpoint for ``job``, writing into ``folder``: :meth:`analyse` once, then
    :func:`summary_block` and :meth:`render` from that one summary; ``announce()`` is called before the reports
    are written (``sbprof run``'s line).

    Example
    -------
    >>> from sbprof.script import JOB
    >>> Reporting(JOB, "out").summary_block(object())
    {}
    """

    job: Job
    folder: Union[str, Path]
    announce: Optional[Callable[[], None]] = None

    def analyse(self, results: Results) -> Any:
        """The job's one analysis of ``results``; a record it refuses (a payload a hand edit broke) is named with
        the file it came from."""
        try:
            return self.job.analyse(results)
        except ConfigError as exc:
            raise _in_file(exc, self.folder) from None

    def summary_block(self, summary: Any) -> Dict[str, Any]:
        return summary_block(self.job, summary)

    def render(self, summary: Any) -> Dict[str, Path]:
        """Render ``summary`` with the job's renderer and write its files into the folder."""
        if self.announce is not None:
            self.announce()
        job, folder = self.job, self.folder
        try:
            files = job.render(summary)
        except ConfigError as exc:
            raise _in_file(exc, folder) from None
        try:
            return write_files(files, folder)
        except OSError as exc:
            blocked = in_the_way(Path(folder), files)
            if blocked is not None:  # named, not taken for a disk's trouble ("File exists", "Not a directory")
                raise StorageError(f"cannot write the reports in {folder}: {blocked}; move it away, then 'sbprof "
                                   f"{job.name} --render-only {folder}' writes them (results.json keeps every "
                                   "finished record)") from None
            raise StorageError(f"cannot write the reports in {folder}: {exc.strerror or exc}; results.json keeps "
                               f"every finished record: {_advice(job, exc, folder)}") from None


def reports(job: Job, results: Results, folder: Union[str, Path]) -> Dict[str, Path]:
    """Analyse ``results`` once, render the job's files from that summary and write them into ``folder``."""
    reporting = Reporting(job, folder)
    return reporting.render(reporting.analyse(results))


def _in_file(exc: ConfigError, folder: Union[str, Path]) -> ConfigError:
    """``exc`` naming the results file of ``folder`` once (not again when it does already)."""
    where, said = str(Path(folder) / RESULTS_FILE), str(exc)
    return exc if where in said else ConfigError(f"{where}: {said.removeprefix(RESULTS_FILE + ': ')}")


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
