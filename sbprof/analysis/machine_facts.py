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
from sbprof.record.results import Results


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


def results_facts(results: Results) -> Optional[MachineFacts]:
    """The facts of the machine a results file was measured on: its ``machine``, and where that names no CPU (a
    cluster's machine type: the driver is not the nodes) the CPU, cores and GPU its records name, when they agree.

    Example
    -------
    >>> from sbprof.record import Env, Measurement
    >>> r = Results("profile", machine={"hostname": "a100 (slurm)"},
    ...             records=[Measurement(label="c", env=Env(cpu="EPYC", cpu_count=64, gpu="A100"))])
    >>> f = results_facts(r); f.cpu, f.cpu_count, f.gpu
    ('EPYC', 64, 'A100')
    """
    machine = dict(results.machine)
    facts = {(m.env.cpu, m.env.cpu_count, m.env.gpu) for m in results.records if m.ok and m.env is not None}
    if machine and "cpu" not in machine and len(facts) == 1:
        cpu, cores, gpu = facts.pop()
        machine.update(cpu=cpu, cpu_count=cores, gpu=gpu)
    return machine_facts(machine)
