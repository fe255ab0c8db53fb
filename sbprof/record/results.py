"""The content of one results file: the job, its rules, models and machine, and every record.

A plain dataclass, read and written as JSON by :mod:`sbprof.results.store`
(atomic files, resume rules) and read by the analysis: what every job's
runner writes and every summary is computed from.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from sbprof.base.errors import ConfigError
from sbprof.record.measurement import Measurement
from sbprof.record.migrate import FORMAT, MACHINE_KEYS, migrate_results

VERSION = 3
"""The results format this sbprof writes (and the newest it reads)."""

KNOWN_KEYS = ("format", "version", "job", "rules", "models", "machine", "notes", "calibration", "records", "summary")
"""The top-level keys sbprof writes (``summary`` is rewritten at every save and never read back)."""

__all__ = ["MACHINE_KEYS", "Machine", "Results", "VERSION", "differences"]


@dataclass
class Results:
    """The content of one results file.

    ``notes`` keeps what the run did on its own (a worker replaced after it
    died between cells), one line each.

    Example
    -------
    >>> r = Results(job="profile", rules={"warmup": 1})
    >>> Results.from_dict(r.to_dict(), "r.json") == r
    True
    """

    job: str
    rules: Dict[str, Any] = field(default_factory=dict)
    models: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    machine: Dict[str, Any] = field(default_factory=dict)
    records: List[Measurement] = field(default_factory=list)
    calibration: List[Measurement] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    # Top-level keys this sbprof does not write (a user's own, a tool's), kept so that saving again drops nothing.
    unknown: Dict[str, Any] = field(default_factory=dict, repr=False)

    # Not the codec's: a results file is more than these fields. It carries its format and version, is migrated
    # from older versions on read (sbprof.record.migrate), names the file in every error, may carry derived
    # figures and a summary that are never read back, and refuses records that repeat a cell. Its records are
    # the codec's (Measurement.to_dict / from_dict).
    def to_dict(self, derive: Optional[Callable[[Measurement], Dict[str, Any]]] = None,
                summary: Optional[Dict[str, Any]] = None) -> dict:
        records = []
        for m in self.records:
            d = m.to_dict()
            if derive is not None:
                d["derived"] = derive(m)
            records.append(d)
        out = {"format": FORMAT, "version": VERSION, "job": self.job, "rules": self.rules, "models": self.models,
               "machine": self.machine, "notes": self.notes, "calibration": [m.to_dict() for m in self.calibration],
               "records": records}
        out.update({k: v for k, v in self.unknown.items() if k not in out and k != "summary"})
        if summary is not None:
            out["summary"] = summary
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "Results":
        """Read (and migrate) a results file's content; one :class:`ConfigError` naming what is wrong."""
        data = migrate_results(data, where, VERSION)
        records = data.get("records")
        if not isinstance(records, list):
            raise ConfigError(f"{where}: 'records' must be a list of records, got {type(records).__name__}")
        calibration = data.get("calibration", [])
        if not isinstance(calibration, list):
            raise ConfigError(f"{where}: 'calibration' must be a list of records")
        for name in ("rules", "models", "machine"):
            if not isinstance(data.get(name, {}), dict):
                raise ConfigError(f"{where}: {name!r} must be a mapping")
        notes = data.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise ConfigError(f"{where}: 'notes' must be a list of lines")
        job = data.get("job")
        if not isinstance(job, str) or not job:
            raise ConfigError(f"{where}: 'job' must name the job that wrote the file, got {job!r}")
        parsed = _records(records, where, "record")
        _refuse_mixed_runs(parsed, where)
        missing = [name for name in ("rules", "models", "machine") if name not in data]
        if missing:
            raise ConfigError(f"{where}: no {missing[0]!r} (what its records were measured under): a results file "
                              "holds it, and a resume is checked against it")
        _refuse_foreign(parsed, data["models"], where)
        return cls(job=job, rules=data["rules"], models=data["models"], machine=data["machine"], records=parsed,
                   calibration=_records(calibration, where, "calibration record"), notes=list(notes),
                   unknown={k: v for k, v in data.items() if k not in KNOWN_KEYS})


def _records(items: List[Any], where: str, what: str) -> List[Measurement]:
    parsed = []
    for i, d in enumerate(items):
        if isinstance(d, dict):
            d = {k: v for k, v in d.items() if k != "derived"}  # derived figures are never read back as data
        try:
            parsed.append(Measurement.from_dict(d))
        except ConfigError as exc:
            label = d.get("label") if isinstance(d, dict) else None
            name = f"{what} {i}" + (f" ({label!r})" if isinstance(label, str) else "")
            raise ConfigError(f"{where}: {name}: {exc}") from None
    return parsed


def _name(i: int, m: Measurement) -> str:
    return f"record {i} ({m.label!r})"


def _refuse_foreign(records: List[Measurement], models: Mapping[str, Any], where: str) -> None:
    """Refuse a record of a model the file's header does not list: a record of another run or another job pasted
    in (a stream record in a profile file), which the job's analysis would read as one of its own.

    Every job names each record's model (its ``model``, or for a comparison its ``variant``) in ``models``; a file
    that lists none (written by hand or by a tool) is not checked.
    """
    if not models:
        return
    for i, m in enumerate(records):
        if m.cell.model not in models and m.cell.variant not in models:
            listed = ", ".join(repr(name) for name in list(models)[:5]) + (", ..." if len(models) > 5 else "")
            raise ConfigError(f"{where}: {_name(i, m)} is of model {m.cell.model!r}, which this file does not list "
                              f"(its models: {listed}): a record of another run or job, pasted in; remove it")


def _refuse_mixed_runs(records: List[Measurement], where: str) -> None:
    """Refuse a record whose coordinates repeat an earlier one's, and runs of a cell not numbered 0, 1, 2...

    Every run of a cell is a fresh worker process numbered in the order it was
    measured, so a repeated record or a run past a missing one can only come
    from an edit or a copy: counted as it stands, a cell would claim runs it
    never had.
    """
    seen: Dict[Tuple[Any, ...], int] = {}
    runs: Dict[Tuple[Any, ...], Set[int]] = {}
    for i, m in enumerate(records):
        key = m.cell.key()
        if key in seen:
            raise ConfigError(f"{where}: {_name(i, m)} repeats the coordinates of record {seen[key]} (same cell, "
                              f"run {m.cell.run}): each measurement is stored once; remove one of them")
        seen[key] = i
        runs.setdefault(replace(m.cell, run=0).key(), set()).add(m.cell.run)
    for i, m in enumerate(records):
        held = runs[replace(m.cell, run=0).key()]
        if m.cell.run >= len(held):
            gap = min(set(range(m.cell.run)) - held)
            raise ConfigError(f"{where}: {_name(i, m)} is run {m.cell.run} of its cell, which holds no run {gap}: "
                              "a cell's runs are numbered 0, 1, 2... as they were measured")


@dataclass(frozen=True)
class Machine:
    """One machine's results (or one rank's) in a merged report: its label there and where they were read."""

    label: str
    source: Path
    results: Results


def differences(stored: Mapping[str, Any], now: Mapping[str, Any], keys: Optional[Iterable[str]] = None) -> List[str]:
    """``key: X there, Y now`` for each key whose value differs (keys missing on one side are not compared).

    Example
    -------
    >>> differences({"torch": "2.13", "cpu": "A"}, {"torch": "2.14", "cpu": "A", "gpu": None})
    ["torch: '2.13' there, '2.14' now"]
    """
    keys = sorted(set(stored) & set(now)) if keys is None else keys
    return [f"{k}: {stored.get(k)!r} there, {now.get(k)!r} now" for k in keys if stored.get(k) != now.get(k)]
