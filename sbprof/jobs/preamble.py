"""The keys every job's configuration shares, with one meaning, one validator and one wording everywhere.

Every job's YAML starts from the same preamble; its own keys come after:

- ``devices``: a device or a list (``cpu``, ``cuda``, ``cuda:N``); ``null``:
  every device of this machine (``cuda:0`` when CUDA is present, and ``cpu``).
  The ``--device`` run option replaces it.
- ``cpu_threads``: torch threads on the CPU, a number or a list; ``null``:
  1, 2, 4, ... up to the machine's logical cores. More threads than cores is
  accepted (up to 1,024) and flagged as oversubscribed.
- ``cuda_threads``: torch threads of a process measuring on a GPU; ``null``: all cores.
- ``seed``: seeds inputs and weights, so runs see identical inputs.
- ``warmup`` / ``measured``: unmeasured calls (batches, steps) first, then
  measured ones, per cell and run.
- ``repeats``: fresh worker processes (runs) per cell: ``{runs: N}`` or
  ``{runs: adaptive, target, min_runs, max_runs, confidence}`` (runs added
  until the cell's interval is within ``target`` of its median).
- ``timeout_s``: a worker silent this long inside one cell (or while loading)
  is stopped and the cell recorded as hung.
- ``time_budget_s``: the whole run's wall-clock budget; ``null`` (default):
  unbounded. No new batch (worker process) starts once it would end past
  the budget (judged from the longest batch so far); a running one is never
  stopped. The results stay resumable, and the report names the cells that
  did not reach their precision target.
- ``output_folder``: where the results go (relative to the working directory).
- ``executor``: where the worker batches run; absent: local worker processes.
  ``{kind: slurm | ray, machines: {NAME: {...}}, ...}`` measures the job once
  per machine type, each batch a Slurm job or a Ray task on a node of its
  type (:mod:`sbprof.cluster.spec`); the devices and thread counts above are
  then checked as text (the nodes have them, not this machine) and are each
  type's defaults.

Run options on the command line, the same for every job: ``--device``,
``--noprogressbar [true|false]``, ``--retry_failed [true|false]``.
Each (device, thread count) is a *setting*; every job measures its cells
once per setting.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from sbprof.base.checks import check_int, check_threads_count, parse_device
from sbprof.base.errors import ConfigError
from sbprof.record.cell import setting_name
from sbprof.record.codec import Codec
from sbprof.base.yamlconfig import check_keys, load_yaml
from sbprof.cluster.spec import ExecutorSpec, check_executor, with_settings

REPEAT_KEYS = ("runs", "target", "min_runs", "max_runs", "confidence")
KEYS = ("devices", "cpu_threads", "cuda_threads", "seed", "warmup", "measured", "repeats", "timeout_s",
        "time_budget_s", "output_folder", "executor")
SCHEMA: Dict[str, Any] = {**{k: None for k in KEYS}, "repeats": {k: None for k in REPEAT_KEYS}}
FLAGS = ("noprogressbar", "retry_failed")
VALUES = ("device",)
DEFAULT_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Repeats:
    """How many fresh worker processes measure each cell (``repeats``).

    ``runs`` is ``"adaptive"`` (add runs until the run-to-run interval is
    within ``target`` of the median, between ``min_runs`` and ``max_runs``)
    or a fixed number of runs.
    """

    runs: Any = 1
    target: float = 0.03
    min_runs: int = 3
    max_runs: int = 6
    confidence: float = 0.95

    @property
    def adaptive(self) -> bool:
        return self.runs == "adaptive"

    @property
    def first_pass(self) -> int:
        """Runs every cell gets at least."""
        return self.min_runs if self.adaptive else int(self.runs)


@dataclass(frozen=True)
class Setting:
    """One worker process's device and torch thread count."""

    device: str
    threads: int

    @property
    def name(self) -> str:
        """Filesystem-safe name, e.g. ``cpu-2threads``."""
        return setting_name(self.device, self.threads)


@dataclass(frozen=True)
class Defaults:
    """A job's defaults for the shared keys that differ by job (a training step is not an inference call)."""

    warmup: int
    measured: int
    output_folder: str
    repeats: Repeats = field(default_factory=Repeats)


@dataclass(frozen=True)
class Preamble(Codec):
    """The validated shared keys (see the module docstring) and the run options."""

    devices: Tuple[str, ...]
    cpu_threads: Tuple[int, ...]
    cuda_threads: int
    seed: int
    warmup: int
    measured: int
    repeats: Repeats
    output_folder: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    time_budget_s: Optional[float] = None
    progress_bar: bool = True
    retry_failed: bool = False
    warnings: Tuple[str, ...] = ()
    executor: Optional[ExecutorSpec] = None

    @property
    def settings(self) -> Tuple[Setting, ...]:
        """Every (device, threads) to measure on: each CPU thread count, and each GPU with ``cuda_threads``."""
        out: List[Setting] = []
        for device in self.devices:
            threads = self.cpu_threads if device == "cpu" else (self.cuda_threads,)
            out.extend(Setting(device, n) for n in threads)
        return tuple(out)


def default_cpu_threads(cores: Optional[int] = None) -> Tuple[int, ...]:
    """Thread counts 1, 2, 4, ... up to ``cores``, plus ``cores`` itself.

    Example
    -------
    >>> default_cpu_threads(2), default_cpu_threads(6)
    ((1, 2), (1, 2, 4, 6))
    """
    cores = cores or os.cpu_count() or 1
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    if counts[-1] != cores:
        counts.append(cores)
    return tuple(counts)


def check_devices(value: Any, where: str) -> Tuple[str, ...]:
    """Devices as ``cpu`` / ``cuda:N``, checked against this machine without creating a CUDA context.

    Example
    -------
    >>> check_devices("cpu", "p.yaml"), check_devices(["cpu"], "p.yaml")
    (('cpu',), ('cpu',))
    >>> check_devices("gpu", "p.yaml")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: p.yaml: devices: 'gpu' is not a device (use cpu, cuda or cuda:N)
    """
    import torch

    if value is None:
        return ("cuda:0", "cpu") if torch.cuda.is_available() else ("cpu",)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError(f"{where}: devices must be null, a device or a list like [cpu, cuda:0], got {value!r}")
    devices: List[str] = []
    for item in items:
        kind, index = parse_device(item, where, "devices")
        name = "cpu"
        if kind == "cuda":
            # Checked without creating a CUDA context in the parent: workers own the GPU.
            if not torch.cuda.is_available():
                raise ConfigError(f"{where}: devices: {item!r} asked for, but CUDA is not available on this machine")
            index = index or 0
            if index >= torch.cuda.device_count():
                raise ConfigError(f"{where}: devices: {item!r}: only {torch.cuda.device_count()} CUDA device(s) here")
            name = f"cuda:{index}"
        if name in devices:
            raise ConfigError(f"{where}: devices lists {name!r} twice")
        devices.append(name)
    return tuple(devices)


def check_threads(value: Any, where: str, warnings: List[str]) -> Tuple[int, ...]:
    """CPU thread counts; more than the cores is accepted, with a warning for the report."""
    if value is None:
        return default_cpu_threads()
    items = [value] if not isinstance(value, (list, tuple)) else value
    if not items:
        raise ConfigError(f"{where}: cpu_threads must be null, a number or a list of numbers, got {value!r}")
    threads = tuple(check_threads_count(n, "cpu_threads", where) for n in items)
    if len(set(threads)) != len(threads):
        raise ConfigError(f"{where}: cpu_threads lists a value twice: {list(threads)!r}")
    cores = os.cpu_count() or 1
    too_many = [n for n in threads if n > cores]
    if too_many:
        # Accepted: oversubscription is a real deployment question; the report says so.
        warnings.append(f"cpu_threads {too_many} exceed this machine's {cores} logical cores: those settings "
                        "measure threads competing for cores (oversubscribed)")
    return threads


def check_repeats(tree: Any, where: str, default: Repeats) -> Repeats:
    """``repeats``: a fixed number of runs or the adaptive rule."""
    if tree is None:
        return default
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{where}: repeats must be a mapping like {{runs: 4}} or {{runs: adaptive, target: 0.05}}, "
                          f"got {tree!r}")
    runs = tree.get("runs", default.runs)
    if runs != "adaptive":
        check_int(runs, "repeats.runs ('adaptive' or a number of runs)", 1, where)
    target = tree.get("target", default.target)
    if not (isinstance(target, (int, float)) and not isinstance(target, bool) and 0 < target < 1):
        raise ConfigError(f"{where}: repeats.target must be a fraction of the median in (0, 1), e.g. 0.03 for "
                          f"+-3%, got {target!r}")
    confidence = tree.get("confidence", default.confidence)
    if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
        raise ConfigError(f"{where}: repeats.confidence must be a level in [0.5, 1), e.g. 0.95, got {confidence!r}")
    min_runs = check_int(tree.get("min_runs", default.min_runs), "repeats.min_runs", 1, where)
    max_runs = check_int(tree.get("max_runs", default.max_runs), "repeats.max_runs", 1, where)
    if max_runs < min_runs:
        raise ConfigError(f"{where}: repeats.max_runs ({max_runs}) must be at least repeats.min_runs ({min_runs})")
    return Repeats(runs=runs, target=float(target), min_runs=min_runs, max_runs=max_runs, confidence=confidence)


def check_output_folder(value: Any, where: str, default: str) -> str:
    """An absolute folder path (relative to the working directory); ``''`` or a path through a symlink loop refused."""
    if value is None:
        value = default
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: output_folder must be a non-empty path, got {value!r}")
    path = os.path.abspath(os.path.expanduser(value))
    if len(path.encode()) >= os.pathconf("/", "PC_PATH_MAX"):
        raise ConfigError(f"{where}: output_folder is {len(path)} characters long, beyond this system's path limit")
    try:
        return str(Path(path).resolve())
    except (RuntimeError, OSError) as exc:  # Python raises RuntimeError for a symlink loop
        raise ConfigError(f"{where}: output_folder {value!r} cannot be used: "
                          f"{'a symbolic link loop' if isinstance(exc, RuntimeError) else exc.strerror}") from None


def check_timeout(value: Any, where: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ConfigError(f"{where}: timeout_s must be a positive number of seconds, got {value!r}")
    return float(value)


def check_time_budget(value: Any, where: str) -> Optional[float]:
    """``time_budget_s``: ``None`` (unbounded) or a positive, finite number of seconds.

    Example
    -------
    >>> check_time_budget(None, "p.yaml"), check_time_budget(90, "p.yaml")
    (None, 90.0)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"{where}: time_budget_s must be a positive number of seconds or null (unbounded), "
                          f"got {value!r}")
    return float(value)


class CommandLineOverrides(dict):
    """Overrides given on the command line (``--key value``), named so in messages; any other mapping is
    :func:`sbprof.run`'s ``overrides=``."""


def load_tree(path: Any, overrides: Optional[Mapping[str, Any]], schema: Dict[str, Any]) -> Mapping[str, Any]:
    """A job's YAML file with the overrides merged in, every key checked against ``schema``.

    One clear line for anything wrong with the file (:func:`sbprof.base.yamlconfig.load_yaml`), an override of an
    unknown key (named as the command line's, or as ``overrides=`` of :func:`sbprof.run`), or an unknown key of
    the file (with a "did you mean").

    Example
    -------
    >>> load_tree("p.yaml", {"sed": 3}, {"seed": None})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: overrides=: unknown key 'sed' (did you mean 'seed'?); known keys here: seed
    """
    if overrides:
        check_keys(overrides, schema, "command line" if isinstance(overrides, CommandLineOverrides) else "overrides=")
    tree = load_yaml(path, overrides)
    check_keys(tree, schema, str(path))
    return tree


def check_preamble(tree: Mapping[str, Any], where: str, run_options: Optional[Mapping[str, Any]],
                   defaults: Defaults) -> Preamble:
    """The shared keys of a loaded YAML tree, and the run options, checked (see the module docstring).

    Example
    -------
    >>> p = check_preamble({"devices": "cpu", "cpu_threads": 1}, "p.yaml", {"noprogressbar": True},
    ...                    Defaults(warmup=1, measured=3, output_folder="results/x"))
    >>> p.settings, p.warmup, p.repeats.runs, p.progress_bar
    ((Setting(device='cpu', threads=1),), 1, 1, False)
    """
    options = dict(run_options or {})
    warnings: List[str] = []
    device = options.get("device")
    if device is not None and not device.strip():
        raise ConfigError("command line: --device needs a device (cpu, cuda or cuda:N), got ''")
    devices, cpu_threads, cuda_threads = (device if device is not None else tree.get("devices"),
                                          tree.get("cpu_threads"), tree.get("cuda_threads"))
    executor = check_executor(tree.get("executor"), where)
    if executor is None:
        devices, cpu_threads = check_devices(devices, where), check_threads(cpu_threads, where, warnings)
        cuda_threads = (os.cpu_count() or 1) if cuda_threads is None else check_threads_count(cuda_threads,
                                                                                              "cuda_threads", where)
    else:  # the nodes have the devices and cores, not this machine: each machine type's own settings
        executor = with_settings(executor, devices, cpu_threads, cuda_threads, where, default_cpu_threads)
        first = executor.machines[0]
        devices, cpu_threads, cuda_threads = first.devices, first.cpu_threads, first.cuda_threads
    return Preamble(
        devices=devices,
        cpu_threads=cpu_threads,
        cuda_threads=cuda_threads,
        seed=check_int(tree.get("seed", 1234), "seed", 0, where),
        warmup=check_int(tree.get("warmup", defaults.warmup), "warmup", 0, where),
        measured=check_int(tree.get("measured", defaults.measured), "measured", 1, where),
        repeats=check_repeats(tree.get("repeats"), where, defaults.repeats),
        output_folder=check_output_folder(tree.get("output_folder", defaults.output_folder), where,
                                          defaults.output_folder),
        timeout_s=check_timeout(tree.get("timeout_s"), where),
        time_budget_s=check_time_budget(tree.get("time_budget_s"), where),
        progress_bar=not options.get("noprogressbar", False),
        retry_failed=bool(options.get("retry_failed", False)),
        warnings=tuple(warnings),
        executor=executor,
    )


def check_run_options(options: Dict[str, Any]) -> None:
    """The command line's checks of its run options, for :func:`sbprof.run`'s keyword arguments (flags are booleans)."""
    for key, value in options.items():
        if key in FLAGS:
            if not isinstance(value, bool):
                raise ConfigError(f"run(): {key} is a flag: give True or False, not {value!r}")
        elif key == "device":
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"run(): device needs a device (cpu, cuda or cuda:N), got {value!r}")
        else:
            raise ConfigError(f"run(): unknown run option {key!r}; the run options are device, "
                              f"{', '.join(FLAGS)}")
