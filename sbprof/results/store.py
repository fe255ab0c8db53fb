"""``results.json``: every finished record of a run, saved atomically after each one.

The file says once what job it holds and under which rules its records were
measured (``rules``), which models it holds (``models``, each with a
fingerprint of its build) and on which machine and library versions
(``machine``); then one record per cell: the raw
:class:`~sbprof.record.Measurement` plus, where the job gives one, a
``derived`` block of figures for readers who do not use sbprof. ``derived``
is recomputed on every write and ignored on load: statistics are never read
back as if they were data.

Resuming keeps what is stored and refuses, naming what differs, to add
records taken under other rules, on another machine or library version, or
from another build of a model: results taken under different conditions
never end up side by side in one table. Another model may join the file.

Files written by earlier versions are read and migrated (:mod:`sbprof.record.migrate`);
a file or record written by a newer sbprof is refused, naming the version this one reads.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from sbprof.base.errors import ConfigError, SbprofError
from sbprof.base.inputfiles import read_input_file
from sbprof.record import Cell, Measurement
from sbprof.record.results import VERSION, Results, differences
from sbprof.base.atomic import atomic_write
from sbprof.results.files import DISK_FULL, SpaceReserve

RESULTS_FILE = "results.json"
MAX_RESULTS_BYTES = 256 * 2**20
"""Results files larger than this are refused unread (a long sweep with every raw sample writes a few MiB)."""

Derive = Callable[[Measurement], Dict[str, Any]]


class StorageError(SbprofError):
    """A results file could not be written (e.g. the disk is full)."""


def load_results(path: Union[str, Path], job: Optional[str] = None) -> Results:
    """Read a results file (or the ``results.json`` in a folder); with ``job``, refuse another job's file.

    Only a regular file is read (not a folder, a FIFO or a device), and at most :data:`MAX_RESULTS_BYTES`.

    Raises
    ------
    ConfigError
        One line naming the file and what is wrong with it.
    """
    path = Path(path)
    if path.name != RESULTS_FILE and path.is_dir():
        path = path / RESULTS_FILE
    raw = read_input_file(path, MAX_RESULTS_BYTES, "results file")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested thousands deep
        why = exc if isinstance(exc, ValueError) else "nested too deep"
        raise ConfigError(f"{path}: not a readable results file ({why}); move it away to start afresh") from None
    results = Results.from_dict(data, str(path))
    from sbprof.analysis.payloads import check_payloads  # each job's payload classes: read only with a file

    older = data.get("version", 1) if isinstance(data, dict) and data.get("version") != VERSION else None
    for line in check_payloads(results, str(path), migrated_from=older):
        print(f"sbprof: {path}: {line}", file=sys.stderr)
    if job is not None and results.job != job:
        raise ConfigError(f"{path} holds results of 'sbprof {results.job}', not of 'sbprof {job}': render it with "
                          f"'sbprof {results.job} --render-only', or give a folder of {job} results")
    return results


class ResultStore:
    """The records of one output folder, mirrored to ``results.json`` after every change.

    Arguments
    ---------
    folder : str or Path
        Where ``results.json`` lives (already checked and locked by the caller).
    results : Results
        What this run measures under: job, rules, its models and machine
        (its records are ignored). An existing file under other conditions
        is refused.
    derive : callable, optional
        Derived figures of a record, written beside it.
    The ``summary`` block (the job's figures from its analysis, apart from
    the records, never read back) is the one :meth:`set_summary` was last
    given: the runner's at its last checkpoint, the analysis its reports show.
    resumes : bool
        Whether running the same command again goes on where this run stopped (``False`` for ``sbprof run``,
        whose script cannot resume): what a full disk's message advises, and whether a save made in the space
        held back still stops the run (see :meth:`commit`).

    Example
    -------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> store = ResultStore(folder, Results("profile", rules={"warmup": 1}))
    >>> store.add(Measurement(label="c", cell=Cell(model="m"), status="skipped"))
    >>> ResultStore(folder, Results("profile", rules={"warmup": 1})).get(Cell(model="m")).status
    'skipped'
    >>> ResultStore(folder, Results("profile", rules={"warmup": 2}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: ...warmup: 1 there, 2 now...
    """

    def __init__(self, folder: Union[str, Path], results: Results, derive: Optional[Derive] = None,
                 resumes: bool = True):
        self.path = Path(folder) / RESULTS_FILE
        self.derive = derive
        self.summary: Optional[Dict[str, Any]] = None  # a stored file's block is rewritten, never carried
        self.resumes = resumes
        self.saved_in_reserve = False  # the last save used the space held back: the disk is full
        # JSON-normal form (tuples -> lists), comparable with a loaded file.
        now = Results.from_dict(json.loads(json.dumps(results.to_dict())), "this run")
        self.results = now
        self._records: Dict[Tuple[Any, ...], Measurement] = {}
        self.reserve = SpaceReserve(self.path.parent)
        if os.path.lexists(self.path):  # whatever it is: a link loop or a FIFO is refused, not written over
            stored = load_results(self.path)
            self._refuse_mismatch(stored, now)
            self.results = Results(job=stored.job, rules=stored.rules, models={**stored.models, **now.models},
                                   machine=stored.machine, calibration=stored.calibration,
                                   notes=stored.notes, unknown=stored.unknown)
            self._records = {m.cell.key(): m for m in stored.records}

    def _refuse_mismatch(self, stored: Results, now: Results) -> None:
        diffs = [] if stored.job == now.job else [f"job: {stored.job!r} there, {now.job!r} now"]
        diffs += differences(stored.rules, now.rules, sorted(set(stored.rules) | set(now.rules)))
        # Every machine key this run knows: one missing there is a machine that cannot be shown to be this one.
        diffs += differences(stored.machine, now.machine, sorted(now.machine))
        for name, info in now.models.items():
            if name in stored.models:
                diffs += [f"model {name}: {d}" for d in differences(stored.models[name], info)]
        if diffs:
            raise ConfigError(
                f"{self.path} was measured under other conditions ({'; '.join(diffs)}); resuming would mix "
                "results taken under different rules: use another --output_folder or move that file away")

    def get(self, cell: Cell) -> Optional[Measurement]:
        return self._records.get(cell.key())

    def records(self) -> List[Measurement]:
        """All stored records, in the order they were first added."""
        return list(self._records.values())

    def snapshot(self) -> Results:
        """The file's content as it stands (what a renderer reads)."""
        r = self.results
        return Results(job=r.job, rules=r.rules, models=r.models, machine=r.machine, records=self.records(),
                       calibration=list(r.calibration), notes=list(r.notes))

    def add(self, measurement: Measurement) -> None:
        """Store (or replace) one record and rewrite the file atomically."""
        self.add_many([measurement])

    def add_many(self, measurements: Iterable[Measurement], notes: Iterable[str] = ()) -> None:
        """Store several records, and ``notes`` about them, with one write (see :meth:`commit` for a failing
        write): on a full disk the space held back saves them all, never a note alone."""
        before, notes_before = dict(self._records), list(self.results.notes)
        for m in measurements:
            self._records[m.cell.key()] = m
        self.results.notes = notes_before + list(notes)

        def rollback() -> None:
            self._records = before
            self.results.notes = notes_before

        self.commit(rollback)

    def add_calibration(self, measurements: Iterable[Measurement]) -> None:
        """Add noise-floor records (kept apart from the cells) and save."""
        self._append("calibration", list(measurements))

    def add_note(self, note: str) -> None:
        """Keep one line about what the run did on its own, and save."""
        self._append("notes", [note])

    def _append(self, name: str, items: List[Any]) -> None:
        before = list(getattr(self.results, name))
        setattr(self.results, name, before + items)

        def rollback() -> None:
            setattr(self.results, name, before)

        self.commit(rollback)

    def commit(self, rollback: Callable[[], None]) -> None:
        """Save; if the write fails, ``rollback`` the change so memory never shows what the file lacks.

        A full disk first gets the reserve back and one more try: the change is
        then saved, and :class:`StorageError` still stops a run that resumes,
        as its next write would fail. A run that cannot resume (``resumes``:
        its records are saved once, at its end) goes on to its reports, with
        :attr:`saved_in_reserve` set.
        """
        try:
            self.save()
        except OSError as exc:
            if exc.errno in DISK_FULL and self.reserve.release():
                try:
                    self.save()
                except OSError:
                    pass
                else:
                    self.saved_in_reserve = True
                    if not self.resumes:
                        return
                    raise StorageError(
                        f"the disk of {self.path.parent} is full: the last result was saved in the space sbprof "
                        f"held back; {len(self._records)} record(s) are in {self.path}. Free some space and run "
                        "the same command again to go on") from None
            rollback()
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}; the {len(self._records)} "
                               "record(s) saved before are kept in it") from None

    def set_summary(self, block: Dict[str, Any]) -> None:
        """Save ``block`` as the file's ``summary`` (the analysis of the records it holds now)."""
        before = self.summary
        self.summary = block

        def rollback() -> None:
            self.summary = before

        self.commit(rollback)

    def save(self) -> None:
        self.results.records = list(self._records.values())
        atomic_write(self.path, json.dumps(self.results.to_dict(self.derive, self.summary), indent=1) + "\n")
