"""The base of every job's record payload (a record's ``extra``): the keys any job's record may hold.

Each job declares what its worker writes in a record's ``extra`` once, as a
:class:`Payload` dataclass: the worker builds it and saves ``to_dict()``, the
analysis reads it back with the codec, and loading a results file refuses a
key that no payload of its job declares (:mod:`sbprof.analysis.payloads`).
``to_dict`` writes only the fields set away from their defaults, so a record
keeps the keys its writer gave it and ``results.json`` its shape.

Example
-------
>>> Payload(extra_error="no GPU").to_dict()
{'extra_error': 'no GPU'}
>>> Payload.from_dict({"retryable": True}).retryable
True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from sbprof.record.codec import Codec, to_json


@dataclass(frozen=True)
class Payload(Codec):
    """A record's ``extra`` declared as a dataclass: :meth:`to_dict` writes the fields that differ from their
    defaults (a key the writer did not set stays absent, as in a record written by hand).

    Its own fields are those any job's record may hold (each job's payload extends it): written by the runner,
    the cluster executor, or a worker that skips a cell.
    """

    extra_error: Optional[str] = None  # the added figures of a cell failed (its timing stands)
    retryable: bool = False  # a skipped cell measured again with --retry_failed
    cluster: Optional[Dict[str, Any]] = None  # the node and conditions of a cell measured on a cluster

    def to_dict(self) -> dict:
        written = to_json(self)
        return {f.name: written[f.name] for f in dataclasses.fields(self) if not _is_default(f, getattr(self, f.name))}


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return value is f.default or (type(value) is type(f.default) and value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return value == f.default_factory()
    return False
