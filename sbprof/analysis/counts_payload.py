"""What a ``flops``, ``params`` or ``modules`` worker saves in its record's ``extra``, typed.

Example
-------
>>> from sbprof.record import Measurement
>>> m = Measurement("c", extra=CountsPayload(command="params", result={"total": 10}).to_dict())
>>> counts_payload(m).result["total"]
10
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

from sbprof.record import Measurement
from sbprof.record.codec import from_json
from sbprof.record.payload import Payload


@dataclass(frozen=True)
class CountsPayload(Payload):
    """The command that counted (``flops``, ``params`` or ``modules``) and its result as a mapping."""

    command: str = ""
    result: Dict[str, Any] = field(default_factory=dict)


def counts_payload(m: Measurement) -> CountsPayload:
    """The record's ``extra``, typed."""
    return from_json(CountsPayload, m.extra, f"record {m.label!r}: extra")
