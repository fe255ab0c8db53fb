"""The machine a results file was measured on (``results.json``'s ``machine``), typed for the reports' headers.

Example
-------
>>> m = machine_facts({"cpu": "Xeon", "cpu_count": 8, "torch": "2.14"})
>>> m.cpu, m.cpu_count, m.gpu, m.speechbrain
('Xeon', 8, None, '?')
>>> machine_facts({}) is None
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from sbprof.record.codec import Codec, from_json


@dataclass(frozen=True)
class MachineFacts(Codec):
    """What a report's header names: CPU, logical cores, GPU and library versions (``?``: not recorded)."""

    hostname: Optional[str] = None
    cpu: Optional[str] = "?"
    cpu_count: Union[int, str, None] = "?"
    gpu: Optional[str] = None
    torch: Optional[str] = "?"
    torchaudio: Optional[str] = "?"
    speechbrain: Optional[str] = "?"
    python: Optional[str] = "?"
    cuda: Optional[str] = None


def machine_facts(machine: Mapping[str, Any]) -> Optional[MachineFacts]:
    """The typed facts of a results file's ``machine``; ``None`` when it holds none."""
    return from_json(MachineFacts, dict(machine), "machine") if machine else None
