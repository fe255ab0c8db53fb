"""Each job's payload classes, and the check that a results file's records hold only the keys they declare.

A worker writes a record's ``extra`` from its job's payload dataclass
(:class:`~sbprof.record.payload.Payload`), and the analysis reads it back
through the same class. :func:`check_payloads` holds a loaded file to those
declarations, at any depth (a field typed as another dataclass, a list or a
mapping of them, is walked; a property a class writes for readers, such as
``ParamCount.frozen``, is no unknown key): in today's format a key no
payload of the job declares (a worker's or an editor's misspelling, which
the codec would otherwise drop into a silent ``None``) is one
:class:`ConfigError` naming its path, the class, the key, its nearest field
and the file; a file of an older format is migrated, and the keys it drops
are named.

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

import copy
import dataclasses
import difflib
import typing
from functools import lru_cache
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from sbprof.analysis.cell_payload import CellPayload
from sbprof.analysis.counts_payload import CountsPayload
from sbprof.analysis.distributed import RankPayload
from sbprof.analysis.run import RunPayload
from sbprof.analysis.stream_payload import StreamPayload
from sbprof.analysis.train import LaunchPayload, TrainPayload
from sbprof.analysis.transducer import TransducerPayload
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement, Results
from sbprof.record.codec import Codec, field_hints

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


@lru_cache(maxsize=None)
def _fields(cls: type) -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _unknown(key: str, classes: Tuple[type, ...]) -> str:
    for cls in classes:
        close = difflib.get_close_matches(key, _fields(cls), n=1)
        if close:
            return f"unknown key {key!r} of {cls.__name__} (did you mean {cls.__name__}.{close[0]}?)"
    return f"unknown key {key!r} of {classes[0].__name__}"


def _strict(hint: Any) -> bool:
    # A class whose own from_dict reads more than its fields (a migration) takes keys it does not declare.
    own = getattr(hint, "from_dict", None)
    plain = own is None or getattr(own, "__func__", None) is Codec.from_dict.__func__
    return dataclasses.is_dataclass(hint) and plain


def _walk(hint: Any, data: Any, path: str) -> Iterator[Tuple[str, Dict[str, Any], str, str]]:
    """Each key of ``data`` that its declared type ``hint`` does not have, at any depth: (where, the mapping
    holding it, the key, why)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # Optional[X]: X (a wider union is not walked: which option is not known)
            yield from _walk(options[0], data, path)
    elif _strict(hint) and isinstance(data, dict):
        hints = field_hints(hint)
        for key in list(data):
            if key in _fields(hint):
                yield from _walk(hints[key], data[key], f"{path}.{key}")
            elif not isinstance(getattr(hint, key, None), property):  # a property: derived, written for readers
                yield path, data, key, _unknown(key, (hint,))
    elif origin in (list, tuple) and isinstance(data, (list, tuple)) and args:
        fixed = origin is tuple and args[-1] is not Ellipsis  # Tuple[X, Y] (else List[X], Tuple[X, ...])
        for i, item in enumerate(data):
            yield from _walk(args[i] if fixed and i < len(args) else args[0], item, f"{path}[{i}]")
    elif origin is dict and isinstance(data, dict) and len(args) == 2:
        for key, item in data.items():
            yield from _walk(args[1], item, f"{path}[{key!r}]")


def unknowns(job: str, m: Measurement) -> Iterator[Tuple[str, Dict[str, Any], str, str]]:
    """Each key of ``m.extra``, at any depth, that no payload of ``job`` declares: (where, the mapping holding
    it, the key, why); none for a job with no declared payload. A key some payload declares is walked with the
    type of the first class that declares it."""
    classes = PAYLOADS.get(job)
    if classes is None:
        return
    for key in list(m.extra):
        owner = next((cls for cls in classes if key in _fields(cls)), None)
        if owner is None:
            yield "extra", m.extra, key, _unknown(key, classes)
        else:
            yield from _walk(field_hints(owner)[key], m.extra[key], f"extra.{key}")


def check_payloads(results: Results, where: str, migrated_from: Optional[int] = None) -> List[str]:
    """Refuse (today's format) or drop (``migrated_from`` an older one) the payload keys, at any depth, that no
    class of the file's job declares; the lines naming what was dropped."""
    dropped: List[str] = []
    for records in (results.records, results.calibration):
        for i, m in enumerate(records):
            if migrated_from is None:
                for path, _, _, why in unknowns(results.job, m):
                    raise ConfigError(f"{where}: record {m.label!r}: {path}: {why}")
                continue
            m = records[i] = dataclasses.replace(m, extra=copy.deepcopy(m.extra))  # the caller's dicts untouched
            for path, holder, key, _ in list(unknowns(results.job, m)):
                del holder[key]
                dropped.append(f"{path}.{key} of record {m.label!r}")
    return [f"migrated from format {migrated_from}: dropped {', '.join(dropped)}"] if dropped else []
