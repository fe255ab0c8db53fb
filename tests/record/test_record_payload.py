"""A payload writes only the keys its writer set, so a record keeps the shape a hand-written ``extra`` had."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from sbprof.record.payload import Payload


@dataclass(frozen=True)
class Sample(Payload):
    count: int = 0
    flag: Optional[bool] = None
    items: List[int] = field(default_factory=list)


def test_only_the_fields_set_away_from_their_defaults_are_written():
    assert Sample().to_dict() == {}
    # False is not the default None, 0 is the default 0: what the writer set is what the record holds
    assert Sample(flag=False, count=0, items=[1]).to_dict() == {"flag": False, "items": [1]}
    assert Sample(count=3, extra_error="no GPU", retryable=True).to_dict() == {
        "extra_error": "no GPU", "retryable": True, "count": 3}


def test_what_is_written_reads_back_the_same():
    p = Sample(count=2, flag=True, items=[4, 5], cluster={"node": "n1"})
    assert Sample.from_dict(p.to_dict()) == p
