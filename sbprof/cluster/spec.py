"""The ``executor`` key: where a job's worker batches run (here, a Slurm cluster, a Ray cluster), checked.

Without the key every batch runs in a local worker process, as always. With
``kind: slurm`` or ``kind: ray`` the job is measured once per machine type
listed under ``machines``; each batch is one Slurm job (or one Ray task) on
a node of its type. A machine type's entry mixes sbprof's own keys
(:data:`OWN_KEYS`: the devices and thread counts measured there, its price)
with the scheduler's: for Slurm any ``sbatch`` option (``partition``,
``gres``, ``constraint``, ``cpus_per_task``, ``time``...), the executor's
top level giving those shared by every type; for Ray the task's options
(``num_cpus``, ``num_gpus``, ``memory``...), the type's name being the
custom resource its nodes carry. Pure: checked before anything runs.

Example
-------
>>> spec = check_executor({"kind": "slurm", "time": 60, "currency": "EUR",
...                        "machines": {"a100": {"partition": "gpu", "gres": "gpu:a100:1", "devices": "cuda:0",
...                                              "price_per_hour": 3.2}}}, "p.yaml")
>>> m = spec.machines[0]
>>> m.name, m.devices, m.price_per_hour, spec.options_of(m)["exclusive"], spec.options_of(m)["time"]
('a100', ('cuda:0',), 3.2, True, 60)
>>> check_executor({"kind": "slurm", "machines": {}}, "p.yaml")
Traceback (most recent call last):
...
sbprof.base.errors.ConfigError: p.yaml: executor.machines must name at least one machine type, like {a100: {partition: gpu}}
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from sbprof.base.checks import check_int, nearest, parse_device
from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec

KINDS = ("local", "slurm", "ray")
OWN_KEYS = ("devices", "cpu_threads", "cuda_threads", "price_per_hour", "price_per_core_hour")
"""A machine type's keys that sbprof reads itself; every other key goes to the scheduler."""
TOP_KEYS = ("kind", "machines", "currency")
SET_BY_SBPROF = ("job_name", "output", "error", "array", "nodes", "ntasks", "ntasks_per_node", "open_mode",
                 "signal", "requeue", "no_requeue", "wrap")
"""sbatch options sbprof sets itself: one job, one node, one task, its own files, never requeued (a requeued job
would measure its cells a second time)."""
NOT_CONDITIONS = ("time", "account", "qos", "mail_type", "mail_user", "comment", "wckey", "dependency", "begin",
                  "deadline", "priority", "nice", "address", "namespace", "runtime_env")
"""Scheduler options that do not change the machine a cell is measured on: a resume may change them."""
RAY_TOP_KEYS = ("address", "namespace", "runtime_env")
MAX_THREADS = 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class MachineType(Codec):
    """One machine type: its name, the settings measured on it, its price and its scheduler options."""

    name: str
    devices: Tuple[str, ...] = ()
    cpu_threads: Tuple[int, ...] = ()
    cuda_threads: Optional[int] = None
    price_per_hour: Optional[float] = None
    price_per_core_hour: Optional[float] = None
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutorSpec(Codec):
    """The checked ``executor`` key (see the module docstring); ``kind`` ``local`` has no machine types."""

    kind: str = "local"
    machines: Tuple[MachineType, ...] = ()
    currency: str = ""
    options: Dict[str, Any] = field(default_factory=dict)

    @property
    def remote(self) -> bool:
        return self.kind != "local"

    def machine(self, name: str) -> MachineType:
        return next(m for m in self.machines if m.name == name)

    def options_of(self, machine: MachineType) -> Dict[str, Any]:
        """The scheduler options of one machine type: the shared ones, then its own (Slurm: exclusive by default)."""
        if self.kind == "ray":
            return dict(machine.options)
        return {"exclusive": True, **self.options, **machine.options}

    def conditions(self, machine: MachineType) -> Dict[str, Any]:
        """What a resume must find unchanged for one machine type: the executor and the options that pick the
        hardware (not the time limit, account or queue)."""
        kept = {k: v for k, v in sorted(self.options_of(machine).items()) if k not in NOT_CONDITIONS}
        return {"executor": self.kind, "type": machine.name, "options": kept}


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _scalar_options(tree: Mapping[str, Any], keys: List[str], where: str, kind: str) -> Dict[str, Any]:
    """Scheduler options as given (``-`` read as ``_``), each a plain value; sbprof's own refused."""
    out: Dict[str, Any] = {}
    for key in keys:
        name = str(key).replace("-", "_")
        value = tree[key]
        if kind == "slurm" and name in SET_BY_SBPROF:
            raise ConfigError(f"{where}.{key}: sbprof sets this sbatch option itself (one job per worker batch, "
                              "on one node, with its own output files, never requeued); leave it out")
        if kind == "slurm" and (isinstance(value, (list, dict)) or value is None):
            raise ConfigError(f"{where}.{key} must be one sbatch value (text, a number or true/false), got {value!r}")
        out[name] = value
    return out


def _threads(value: Any, name: str) -> Tuple[int, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ConfigError(f"{name} must be a number or a list of numbers, got {value!r}")
    threads = tuple(check_int(n, name, 1, maximum=MAX_THREADS) for n in items)
    if len(set(threads)) != len(threads):
        raise ConfigError(f"{name} lists a value twice: {list(threads)!r}")
    return threads


def _devices(value: Any, name: str) -> Tuple[str, ...]:
    """Devices checked as text only: the node, not this machine, has them (a worker there says if it has not)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError(f"{name} must be a device or a list like [cpu, cuda:0], got {value!r}")
    out = []
    for item in items:
        kind, index = parse_device(item, "", name)
        out.append("cpu" if kind == "cpu" else f"cuda:{index or 0}")
    if len(set(out)) != len(out):
        raise ConfigError(f"{name} lists a device twice: {out!r}")
    return tuple(out)


def _machine(name: Any, tree: Any, where: str, kind: str) -> MachineType:
    at = f"{where}.machines.{name}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}.machines: {name!r} cannot name a machine type (it names a folder and a Ray "
                          "resource): use letters, digits, '.', '_' or '-', at most 64")
    tree = {} if tree is None else tree
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{at} must be a mapping of options, got {tree!r}")
    own = {k: tree[k] for k in OWN_KEYS if tree.get(k) is not None}
    return MachineType(
        name=name,
        devices=_devices(own["devices"], f"{at}.devices") if "devices" in own else (),
        cpu_threads=_threads(own["cpu_threads"], f"{at}.cpu_threads") if "cpu_threads" in own else (),
        cuda_threads=check_int(own["cuda_threads"], f"{at}.cuda_threads", 1, maximum=MAX_THREADS)
        if "cuda_threads" in own else None,
        price_per_hour=_number(own["price_per_hour"], f"{at}.price_per_hour") if "price_per_hour" in own else None,
        price_per_core_hour=_number(own["price_per_core_hour"], f"{at}.price_per_core_hour")
        if "price_per_core_hour" in own else None,
        options=_scalar_options(tree, [k for k in tree if k not in OWN_KEYS], at, kind))


def check_executor(tree: Any, where: str) -> Optional[ExecutorSpec]:
    """The ``executor`` key checked (see the module docstring); ``None`` (absent, or ``kind: local``): local
    worker processes."""
    if tree is None:
        return None
    at = f"{where}: executor"
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{at} must be a mapping like {{kind: slurm, machines: {{...}}}}, got {tree!r}")
    kind = tree.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{at}.kind must be one of {', '.join(KINDS)}, got {kind!r}{nearest(str(kind), KINDS)}")
    if kind == "local":
        extra = sorted(set(tree) - {"kind"})
        if extra:
            raise ConfigError(f"{at}: kind local runs worker processes on this machine and takes no other key "
                              f"(got {', '.join(map(str, extra))})")
        return None
    machines = tree.get("machines")
    if not isinstance(machines, Mapping) or not machines:
        raise ConfigError(f"{at}.machines must name at least one machine type, like {{a100: {{partition: gpu}}}}")
    rest = [k for k in tree if k not in TOP_KEYS]
    if kind == "ray":
        unknown = [k for k in rest if k not in RAY_TOP_KEYS]
        if unknown:
            raise ConfigError(f"{at}: unknown key {unknown[0]!r} for kind ray{nearest(str(unknown[0]), RAY_TOP_KEYS)};"
                              f" the executor takes {', '.join(TOP_KEYS + RAY_TOP_KEYS)} (a task's options go under "
                              "its machine type)")
    options = _scalar_options(tree, rest, at, kind)
    if kind == "ray":
        options.setdefault("address", "auto")
    types = tuple(_machine(name, sub, at, kind) for name, sub in machines.items())
    currency = tree.get("currency")
    if currency is not None and (not isinstance(currency, str) or not currency.strip()):
        raise ConfigError(f"{at}.currency must name the prices' currency (EUR, USD, credits...), got {currency!r}")
    priced = [m.name for m in types if m.price_per_hour is not None or m.price_per_core_hour is not None]
    if priced and currency is None:
        raise ConfigError(f"{at}: machine type {priced[0]!r} has a price: name its currency with "
                          "executor.currency (EUR, USD, credits...)")
    return ExecutorSpec(kind=kind, machines=types, currency=currency or "", options=options)


def with_settings(spec: ExecutorSpec, devices: Any, cpu_threads: Any, cuda_threads: Any, where: str,
                  default_threads: Callable[[int], Tuple[int, ...]]) -> ExecutorSpec:
    """Each machine type's devices and thread counts made whole: its own, else the job's (``devices``,
    ``cpu_threads``, ``cuda_threads`` as given, ``None`` when absent), else ``cpu`` and ``default_threads`` of its
    ``cpus_per_task`` (of this machine's cores when it gives none).

    Example
    -------
    >>> spec = check_executor({"kind": "slurm", "machines": {"c8": {"cpus_per_task": 8}, "g": {"devices": "cuda"}}},
    ...                       "p.yaml")
    >>> [(m.devices, m.cpu_threads, m.cuda_threads) for m in with_settings(spec, None, None, None, "p.yaml",
    ...                                                                     lambda n: (1, n)).machines][0]
    (('cpu',), (1, 8), 8)
    """
    at = f"{where}: "
    devices = _devices(devices, f"{at}devices") if devices is not None else ("cpu",)
    threads = _threads(cpu_threads, f"{at}cpu_threads") if cpu_threads is not None else None
    cuda = check_int(cuda_threads, f"{at}cuda_threads", 1, maximum=MAX_THREADS) if cuda_threads is not None else None
    out = []
    for m in spec.machines:
        cores = spec.options_of(m).get("cpus_per_task", m.options.get("num_cpus"))
        cores = cores if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0 else None
        out.append(replace(m, devices=m.devices or devices,
                           cpu_threads=m.cpu_threads or threads or default_threads(cores or os.cpu_count() or 1),
                           cuda_threads=m.cuda_threads or cuda or cores or os.cpu_count() or 1))
    return replace(spec, machines=tuple(out))
