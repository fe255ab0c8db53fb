"""The one codec (sbprof.record.codec): dataclass <-> JSON from the type hints, checked against hand-written JSON."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from sbprof.base.errors import ConfigError
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.record.codec import Codec, from_json, to_json


@dataclass(frozen=True)
class Inner(Codec):
    name: str
    weight: float = 1.0


@dataclass
class Outer(Codec):
    inner: Inner
    maybe: Optional[Inner] = None
    items: List[Inner] = field(default_factory=list)
    shape: Tuple[int, ...] = ()
    pair: Tuple[str, float] = ("a", 0.0)
    by_rank: Dict[int, List[float]] = field(default_factory=dict)
    where: Optional[Path] = None
    anything: Any = None


FULL = Outer(inner=Inner("x", 2.5), maybe=Inner("y"), items=[Inner("p"), Inner("q", 0.5)], shape=(4, 16),
             pair=("b", 3), by_rank={0: [0.1], 3: [0.2, 0.3]}, where=Path("/tmp/r.json"), anything={"k": [1]})
FULL_JSON = {"inner": {"name": "x", "weight": 2.5}, "maybe": {"name": "y", "weight": 1.0},
             "items": [{"name": "p", "weight": 1.0}, {"name": "q", "weight": 0.5}], "shape": [4, 16],
             "pair": ["b", 3], "by_rank": {"0": [0.1], "3": [0.2, 0.3]}, "where": "/tmp/r.json",
             "anything": {"k": [1]}}


def test_a_nested_dataclass_is_written_as_hand_written_json_and_read_back_equal():
    assert FULL.to_dict() == FULL_JSON
    # Through real JSON text: tuples come back as tuples, int keys as ints, paths as paths.
    again = Outer.from_dict(json.loads(json.dumps(FULL.to_dict())))
    assert again == FULL
    assert isinstance(again.shape, tuple) and list(again.by_rank) == [0, 3] and isinstance(again.where, Path)


def test_optional_none_and_defaults_round_trip():
    bare = Outer(inner=Inner("x"))
    assert bare.to_dict()["maybe"] is None and bare.to_dict()["by_rank"] == {}
    assert Outer.from_dict(bare.to_dict()) == bare


def test_a_newer_writers_unknown_key_is_dropped_and_a_missing_defaulted_key_takes_its_default():
    read = Outer.from_dict({"inner": {"name": "x", "colour": "red"}, "added_in_v9": 1})
    assert read == Outer(inner=Inner("x", 1.0))


def test_a_missing_key_without_default_is_one_error_naming_it():
    with pytest.raises(ConfigError, match=r"^Outer\.inner: missing name$"):
        Outer.from_dict({"inner": {"weight": 1.0}})


@pytest.mark.parametrize("data, message", [
    ({"inner": {"name": 3}}, r"^Outer\.inner\.name: expected a string, got 3$"),
    ({"inner": {"name": "x", "weight": "heavy"}}, r"^Outer\.inner\.weight: expected a number, got 'heavy'$"),
    ({"inner": {"name": "x", "weight": True}}, r"^Outer\.inner\.weight: expected a number, got True$"),
    ({"inner": {"name": "x"}, "shape": [4, 1.5]}, r"^Outer\.shape\[1\]: expected an integer, got 1\.5$"),
    ({"inner": {"name": "x"}, "pair": ["b"]}, r"^Outer\.pair: expected 2 items, got 1$"),
    ({"inner": {"name": "x"}, "items": {"name": "p"}}, r"^Outer\.items: expected a list, got \{'name': 'p'\}$"),
    ({"inner": {"name": "x"}, "by_rank": {"0": "fast"}}, r"^Outer\.by_rank\['0'\]: expected a list, got 'fast'$"),
    ({"inner": "x"}, r"^Outer\.inner: expected a mapping, got 'x'$"),
])
def test_a_value_of_the_wrong_kind_is_one_error_naming_class_and_field(data, message):
    with pytest.raises(ConfigError, match=message):
        Outer.from_dict(data)


def test_a_nested_class_with_its_own_to_dict_and_from_dict_is_written_and_read_by_them():
    """A record inside a dataclass keeps its version, its migration and its unknown keys."""
    @dataclass
    class Holder(Codec):
        records: List[Measurement] = field(default_factory=list)

    m = Measurement(label="c", cell=Cell(model="m", audio_s=1.0), wall_s=[0.1], cpu_s=[0.1],
                    memory=MemoryPeak(peak_rss_bytes=10), unknown={"thermal": "ok"})
    data = Holder([m]).to_dict()
    assert data["records"][0]["schema_version"] == 2 and data["records"][0]["thermal"] == "ok"
    assert Holder.from_dict(json.loads(json.dumps(data))) == Holder([m])


def test_to_json_and_from_json_work_without_the_mixin():
    @dataclass
    class Plain:
        values: Tuple[float, ...]

    assert to_json(Plain((1.0, 2.0))) == {"values": [1.0, 2.0]}
    assert from_json(Plain, {"values": [1.0, 2.0]}) == Plain((1.0, 2.0))
