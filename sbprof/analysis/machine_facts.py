"""The machine a results file was measured on (``results.json``'s ``machine``), typed for the reports' headers.

Example
-------
>>> m = machine_facts({"cpu": "Xeon", "cpu_count": 8, "torch": "2.14", "gpu": None})
>>> m.cpu, m.cpu_count, m.gpu, m.speechbrain
('Xeon', 8, None, 'unknown')
>>> machine_facts({}) == MachineFacts()
True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from sbprof.record.codec import Codec, from_json
from sbprof.record.results import Results

UNKNOWN = "unknown"
"""What a fact reads as when the results file does not record it (an older file, a machine type of a cluster)."""


@dataclass(frozen=True)
class MachineFacts(Codec):
    """What a report's header names: CPU, logical cores, GPU and library versions (:data:`UNKNOWN`: not recorded;
    ``gpu`` ``None``: recorded, and the machine has none)."""

    hostname: Optional[str] = None
    cpu: Optional[str] = UNKNOWN
    cpu_count: Union[int, str, None] = UNKNOWN
    gpu: Optional[str] = UNKNOWN
    torch: Optional[str] = UNKNOWN
    torchaudio: Optional[str] = UNKNOWN
    speechbrain: Optional[str] = UNKNOWN
    python: Optional[str] = UNKNOWN
    cuda: Optional[str] = UNKNOWN


_FIELDS = tuple(f.name for f in dataclasses.fields(MachineFacts))


def machine_facts(machine: Mapping[str, Any]) -> MachineFacts:
    """The typed facts of a results file's ``machine`` (or a record's ``env``: its other keys are not facts of the
    machine); every fact it does not hold reads :data:`UNKNOWN`."""
    return from_json(MachineFacts, {k: v for k, v in machine.items() if k in _FIELDS}, "machine")


def results_facts(results: Results) -> MachineFacts:
    """The facts of the machine a results file was measured on: its ``machine``; where that names no CPU (a
    cluster's machine type: the driver is not the nodes) the CPU, cores and GPU its records name, when they agree;
    where the file names no machine at all (results built by hand), its first record's environment.

    Example
    -------
    >>> from sbprof.record import Env, Measurement
    >>> r = Results("profile", machine={"hostname": "a100 (slurm)"},
    ...             records=[Measurement(label="c", env=Env(cpu="EPYC", cpu_count=64, gpu="A100"))])
    >>> f = results_facts(r); f.cpu, f.cpu_count, f.gpu, f.torch
    ('EPYC', 64, 'A100', 'unknown')
    """
    machine = dict(results.machine)
    envs = [m.env for m in results.records if m.env is not None]
    facts = {(m.env.cpu, m.env.cpu_count, m.env.gpu) for m in results.records if m.ok and m.env is not None}
    if not machine and envs:
        machine = envs[0].to_dict()
    elif machine and "cpu" not in machine and len(facts) == 1:
        cpu, cores, gpu = facts.pop()
        machine.update(cpu=cpu, cpu_count=cores, gpu=gpu)
    return machine_facts(machine)
