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

Version-1 files (``sbprof-sweep-results``) are read and migrated.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from sbprof.errors import ConfigError, SbprofError
from sbprof.record import Cell, Measurement
from sbprof.results.files import DISK_FULL, SpaceReserve, atomic_write_text

FORMAT = "sbprof-results"
VERSION = 2
RESULTS_FILE = "results.json"
MACHINE_KEYS = ("hostname", "cpu", "cpu_count", "python", "torch", "torchaudio", "speechbrain", "cuda", "gpu")

Derive = Callable[[Measurement], Dict[str, Any]]
Summarise = Callable[["Results"], Dict[str, Any]]


class StorageError(SbprofError):
    """A results file could not be written (e.g. the disk is full)."""


@dataclass
class Results:
    """The content of one results file.

    Example
    -------
    >>> r = Results(job="sweep", rules={"warmup_batches": 1})
    >>> Results.from_dict(r.to_dict(), "r.json") == r
    True
    """

    job: str
    rules: Dict[str, Any] = field(default_factory=dict)
    models: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    machine: Dict[str, Any] = field(default_factory=dict)
    records: List[Measurement] = field(default_factory=list)
    calibration: List[Measurement] = field(default_factory=list)

    def to_dict(self, derive: Optional[Derive] = None, summarise: Optional[Summarise] = None) -> dict:
        records = []
        for m in self.records:
            d = m.to_dict()
            if derive is not None:
                d["derived"] = derive(m)
            records.append(d)
        out = {"format": FORMAT, "version": VERSION, "job": self.job, "rules": self.rules, "models": self.models,
               "machine": self.machine, "calibration": [m.to_dict() for m in self.calibration], "records": records}
        if summarise is not None:
            out["summary"] = summarise(self)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "Results":
        if not isinstance(data, dict) or data.get("format") not in (FORMAT, "sbprof-sweep-results"):
            raise ConfigError(f"{where}: not an sbprof results file")
        if data["format"] == "sbprof-sweep-results":
            data = _from_version_1(data, where)
        elif not isinstance(data.get("version"), int) or data["version"] < VERSION:
            raise ConfigError(f"{where}: results format version {data.get('version')!r} is not supported")
        records = data.get("records")
        if not isinstance(records, list):
            raise ConfigError(f"{where}: 'records' must be a list of records, got {type(records).__name__}")
        parsed = _records(records, where, "record")
        calibration = data.get("calibration", [])
        if not isinstance(calibration, list):
            raise ConfigError(f"{where}: 'calibration' must be a list of records")
        for name in ("rules", "models", "machine"):
            if not isinstance(data.get(name, {}), dict):
                raise ConfigError(f"{where}: {name!r} must be a mapping")
        return cls(job=str(data.get("job", "sweep")), rules=data.get("rules", {}), models=data.get("models", {}),
                   machine=data.get("machine", {}), records=parsed,
                   calibration=_records(calibration, where, "calibration record"))


def _records(items: List[Any], where: str, what: str) -> List[Measurement]:
    parsed = []
    for i, d in enumerate(items):
        try:
            d = dict(d)
            d.pop("derived", None)  # derived figures are never read back as data
            parsed.append(Measurement.from_dict(d))
        except (TypeError, ValueError, AttributeError) as exc:  # ConfigError is a ValueError
            raise ConfigError(f"{where}: {what} {i} is not a valid measurement ({exc})") from None
    return parsed


def _from_version_1(data: Dict[str, Any], where: str) -> Dict[str, Any]:
    """A version-1 sweep file in today's layout: one model, the machine read from its records."""
    settings = data.get("settings")
    cells = data.get("cells")
    if not isinstance(settings, dict) or not isinstance(cells, list):
        raise ConfigError(f"{where}: a version-1 results file needs 'settings' (a mapping) and 'cells' (a list)")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("config"), dict):
            raise ConfigError(f"{where}: cell {i} has no coordinates ('config')")
        missing = [k for k in ("model", "device", "threads", "audio_s", "batch_size") if k not in cell["config"]]
        if missing:
            raise ConfigError(f"{where}: cell {i} lacks its coordinate(s) {', '.join(missing)}")
    env = next((c.get("env") for c in cells if isinstance(c.get("env"), dict)), {}) or {}
    return {
        "job": "sweep",
        "rules": {k: settings[k] for k in ("input", "warmup_batches", "measured_batches") if k in settings},
        "models": {settings.get("model", ""): {k: settings[k] for k in ("model_kind", "interface", "method", "args")
                                              if k in settings}},
        "machine": {k: env[k] for k in MACHINE_KEYS if k in env},
        "records": cells,
    }


def load_results(path: Union[str, Path]) -> Results:
    """Read a results file (or the ``results.json`` in a folder).

    Raises
    ------
    ConfigError
        One line naming the file and what is wrong with it.
    """
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such results file") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable results file ({exc}); move it away to start afresh") from None
    return Results.from_dict(data, str(path))


def differences(stored: Mapping[str, Any], now: Mapping[str, Any], keys: Optional[Iterable[str]] = None) -> List[str]:
    """``key: X there, Y now`` for each key whose value differs (keys missing on one side are not compared).

    Example
    -------
    >>> differences({"torch": "2.13", "cpu": "A"}, {"torch": "2.14", "cpu": "A", "gpu": None})
    ["torch: '2.13' there, '2.14' now"]
    """
    keys = sorted(set(stored) & set(now)) if keys is None else keys
    return [f"{k}: {stored.get(k)!r} there, {now.get(k)!r} now" for k in keys if stored.get(k) != now.get(k)]


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
    summarise : callable, optional
        Figures derived from the whole file (e.g. predicted cells), written in
        a ``summary`` block apart from the records, never read back.

    Example
    -------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> store = ResultStore(folder, Results("sweep", rules={"warmup_batches": 1}))
    >>> store.add(Measurement(label="c", cell=Cell(model="m"), status="skipped"))
    >>> ResultStore(folder, Results("sweep", rules={"warmup_batches": 1})).get(Cell(model="m")).status
    'skipped'
    >>> ResultStore(folder, Results("sweep", rules={"warmup_batches": 2}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: ...warmup_batches: 1 there, 2 now...
    """

    def __init__(self, folder: Union[str, Path], results: Results, derive: Optional[Derive] = None,
                 summarise: Optional[Summarise] = None):
        self.path = Path(folder) / RESULTS_FILE
        self.derive = derive
        self.summarise = summarise
        # JSON-normal form (tuples -> lists), comparable with a loaded file.
        now = Results.from_dict(json.loads(json.dumps(results.to_dict())), "this run")
        self.results = now
        self._records: Dict[Tuple[Any, ...], Measurement] = {}
        self.reserve = SpaceReserve(self.path.parent)
        if self.path.exists():
            stored = load_results(self.path)
            self._refuse_mismatch(stored, now)
            self.results = Results(job=stored.job, rules=stored.rules, models={**stored.models, **now.models},
                                   machine=stored.machine or now.machine, calibration=stored.calibration)
            self._records = {m.cell.key(): m for m in stored.records}

    def _refuse_mismatch(self, stored: Results, now: Results) -> None:
        diffs = [] if stored.job == now.job else [f"job: {stored.job!r} there, {now.job!r} now"]
        diffs += differences(stored.rules, now.rules, sorted(set(stored.rules) | set(now.rules)))
        diffs += differences(stored.machine, now.machine)
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
                       calibration=list(r.calibration))

    def add(self, measurement: Measurement) -> None:
        """Store (or replace) one record and rewrite the file atomically."""
        self.add_many([measurement])

    def add_extra(self, cell: Cell, extra: Mapping[str, Any]) -> None:
        """Add figures taken after a cell was measured (a profiled pass) to its record, and save."""
        stored = self._records[cell.key()]
        self.add(Measurement.from_dict({**stored.to_dict(), "extra": {**stored.extra, **extra}}))

    def add_many(self, measurements: Iterable[Measurement]) -> None:
        """Store several records with one write (see :meth:`commit` for a failing write)."""
        before = dict(self._records)
        for m in measurements:
            self._records[m.cell.key()] = m

        def rollback() -> None:
            self._records = before

        self.commit(rollback)

    def add_calibration(self, measurements: Iterable[Measurement]) -> None:
        """Add noise-floor records (kept apart from the cells) and save."""
        before = list(self.results.calibration)
        self.results.calibration = before + list(measurements)

        def rollback() -> None:
            self.results.calibration = before

        self.commit(rollback)

    def commit(self, rollback: Callable[[], None]) -> None:
        """Save; if the write fails, ``rollback`` the change so memory never shows what the file lacks.

        A full disk first gets the reserve back and one more try: the change is
        then saved, and :class:`StorageError` still stops the run, as the next
        write would fail.
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
                    raise StorageError(
                        f"the disk of {self.path.parent} is full: the last result was saved in the space sbprof "
                        f"held back; {len(self._records)} record(s) are in {self.path}. Free some space and run "
                        "the same command again to go on") from None
            rollback()
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}; the {len(self._records)} "
                               "record(s) saved before are kept in it") from None

    def save(self) -> None:
        self.results.records = list(self._records.values())
        atomic_write_text(self.path, json.dumps(self.results.to_dict(self.derive, self.summarise), indent=1) + "\n")
