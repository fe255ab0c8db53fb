"""Each job's payload classes, and the check that a results file's records hold only the keys they declare.

A worker writes a record's ``extra`` from its job's payload dataclass
(:class:`~sbprof.record.payload.Payload`), and the analysis reads it back
through the same class. :func:`check_payloads` holds a loaded file to those
declarations: in today's format a key no payload of the job declares (a
worker's or an editor's misspelling, which the codec would otherwise drop
into a silent ``None``) is one :class:`ConfigError` naming the class, the
key, its nearest field and the file; a file of an older format is migrated,
and the keys it drops are named.

Example
-------
>>> from sbprof.record import Measurement, Results
>>> r = Results(job="profile", records=[Measurement("c", extra={"loadavg_1m": 1.0, "window": 2.0})])
>>> check_payloads(r, "r.json")
Traceback (most recent call last):
...
sbprof.base.errors.ConfigError: r.json: record 'c': extra: unknown key 'window' of CellPayload (did you mean CellPayload.window_s?)
>>> check_payloads(r, "r.json", migrated_from=2), r.records[0].extra
(["migrated from format 2: dropped extra.window of record 'c'"], {'loadavg_1m': 1.0})
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Dict, List, Optional, Set, Tuple

from sbprof.analysis.cell_payload import CellPayload
from sbprof.analysis.counts_payload import CountsPayload
from sbprof.analysis.distributed import RankPayload
from sbprof.analysis.run import RunPayload
from sbprof.analysis.stream_payload import StreamPayload
from sbprof.analysis.train import LaunchPayload, TrainPayload
from sbprof.analysis.transducer import TransducerPayload
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement, Results

PAYLOADS: Dict[str, Tuple[type, ...]] = {
    "run": (RunPayload, RankPayload),
    "vary": (RunPayload,),
    "profile": (CellPayload,),
    "compare-models": (CellPayload,),
    "train": (TrainPayload, LaunchPayload, RankPayload),
    "transducer": (TransducerPayload,),
    "stream": (StreamPayload,),
    **dict.fromkeys(("flops", "params", "modules"), (CountsPayload,)),
}
"""Per job, the payload classes its records' ``extra`` is written from (the first is named when no field is
near an unknown key); each extends :class:`~sbprof.record.payload.Payload`, the keys any record may hold."""


def _fields(cls: type) -> List[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _known(job: str) -> Set[str]:
    return {name for cls in PAYLOADS[job] for name in _fields(cls)}


def unknown_key(job: str, m: Measurement) -> Optional[str]:
    """Why the first key of ``m.extra`` that no payload of ``job`` declares is unknown, or ``None``
    (``None`` too for a job with no declared payload)."""
    classes = PAYLOADS.get(job)
    if classes is None:
        return None
    known = _known(job)
    for key in m.extra:
        if key in known:
            continue
        for cls in classes:
            close = difflib.get_close_matches(key, _fields(cls), n=1)
            if close:
                return f"unknown key {key!r} of {cls.__name__} (did you mean {cls.__name__}.{close[0]}?)"
        return f"unknown key {key!r} of {classes[0].__name__}"
    return None


def check_payloads(results: Results, where: str, migrated_from: Optional[int] = None) -> List[str]:
    """Refuse (today's format) or drop (``migrated_from`` an older one) the payload keys no class of the file's
    job declares; the lines naming what was dropped."""
    dropped: List[str] = []
    for records in (results.records, results.calibration):
        for i, m in enumerate(records):
            why = unknown_key(results.job, m)
            if why is None:
                continue
            if migrated_from is None:
                raise ConfigError(f"{where}: record {m.label!r}: extra: {why}")
            known = _known(results.job)
            gone = [k for k in m.extra if k not in known]
            dropped += [f"extra.{k} of record {m.label!r}" for k in gone]
            records[i] = dataclasses.replace(m, extra={k: v for k, v in m.extra.items() if k in known})
    return [f"migrated from format {migrated_from}: dropped {', '.join(dropped)}"] if dropped else []
