"""``sbprof run --vary "KNOB: [V1, V2]"``: the knobs a comparison varies, and the variants they make.

A spec names one knob and its values, the first the base's. Built-in knobs
need nothing from the script (:mod:`sbprof.script.knobs` sets them in the
child process); ``args`` gives the script's own arguments per variant; any
other name is one of the script's own options, ``--NAME VALUE``. Several
specs give their product, or with ``one_at_a_time`` each knob's other values
against the base.

Example
-------
>>> [v.name for v in variants(["num_workers: [0, 2]", "threads: [1, 2]"])]
['base', 'threads 2', 'num_workers 2', 'num_workers 2, threads 2']
>>> variants(["batch_size: [8, 16]"])[1].args
['--batch_size', '16']
"""
from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import yaml

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "fp16")
MATMUL_PRECISIONS = ("highest", "high", "medium")
KNOBS: Dict[str, str] = {
    "threads": "torch intra-op threads (torch.set_num_threads, OMP_NUM_THREADS)",
    "num_workers": "worker processes of every DataLoader the script makes",
    "pin_memory": "pin_memory of every DataLoader the script makes",
    "precision": "autocast fp32 / bf16 / fp16 (a Brain's own precision run option; autocast for a plain loop)",
    "matmul_precision": "torch.set_float32_matmul_precision: highest / high / medium",
    "cudnn_benchmark": "torch.backends.cudnn.benchmark",
    "compile": "torch.compile of the step's modules (a Brain's own compile run option; the top-level modules a "
               "plain loop calls)",
    "args": "the script's own arguments, one string per value",
}
"""The knobs that need nothing from the script, and ``args``; any other name is a script option."""


@dataclass(frozen=True)
class Variant:
    """One variant: its name, the built-in knobs it sets and the script arguments it adds."""

    name: str
    knobs: Dict[str, Any] = field(default_factory=dict)
    args: List[str] = field(default_factory=list)
    changes: Tuple[Tuple[str, Any], ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "knobs": dict(self.knobs), "args": list(self.args),
                "changes": [list(c) for c in self.changes]}


def _check_value(knob: str, value: Any, spec: str) -> Any:
    """The value a knob takes (a bad one: :class:`ConfigError` naming the spec)."""
    def bad(what: str) -> ConfigError:
        return ConfigError(f"--vary {spec!r}: {knob} takes {what}, got {value!r}")
    if knob in ("threads", "num_workers"):
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if knob == "threads" else 0):
            raise bad("a whole number" + (" of at least 1" if knob == "threads" else " of at least 0"))
    elif knob in ("pin_memory", "cudnn_benchmark", "compile"):
        if not isinstance(value, bool):
            raise bad("true or false")
    elif knob == "precision":
        if value not in PRECISIONS:
            raise bad(" / ".join(PRECISIONS))
    elif knob == "matmul_precision":
        if value not in MATMUL_PRECISIONS:
            raise bad(" / ".join(MATMUL_PRECISIONS))
    elif knob == "args":
        if not isinstance(value, str):
            raise bad('one string per value, e.g. args: ["--lr 0.1", "--lr 0.2"]')
    elif isinstance(value, (list, dict)) or value is None:
        raise bad("a single value per variant")
    return value


def parse_spec(spec: str) -> Tuple[str, List[Any]]:
    """``"KNOB: [V1, V2, ...]"`` as the knob and its values (YAML values); :class:`ConfigError` otherwise.

    Example
    -------
    >>> parse_spec("precision: [fp32, bf16]")
    ('precision', ['fp32', 'bf16'])
    >>> parse_spec("num_worker: [0, 2]")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --vary 'num_worker: [0, 2]': unknown knob 'num_worker' (did you mean 'num_workers'?); knobs: threads, num_workers, pin_memory, precision, matmul_precision, cudnn_benchmark, compile, args, or one of the script's own options
    """
    try:
        tree = yaml.safe_load(spec)
    except yaml.YAMLError:
        tree = None
    if not isinstance(tree, dict) or len(tree) != 1:
        raise ConfigError(f"--vary {spec!r}: give one knob and its values, e.g. --vary \"num_workers: [0, 2, 4]\"")
    knob, values = next(iter(tree.items()))
    if not isinstance(knob, str) or not knob.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ConfigError(f"--vary {spec!r}: {knob!r} is not a knob's name")
    if not isinstance(values, list) or len(values) < 2:
        raise ConfigError(f"--vary {spec!r}: give {knob} at least two values in a list, the base's first, "
                          f"e.g. --vary \"{knob}: [A, B]\"")
    close = nearest(knob, list(KNOBS))
    if knob not in KNOBS and close:  # a misspelt knob, not a script option that happens to be near one
        raise ConfigError(f"--vary {spec!r}: unknown knob {knob!r}{close}; knobs: {', '.join(KNOBS)}, or one of "
                          "the script's own options")
    values = [_check_value(knob, v, spec) for v in values]
    if len({repr(v) for v in values}) != len(values):
        raise ConfigError(f"--vary {spec!r}: a value is given twice")
    return knob, values


def _words(knob: str, value: Any) -> str:
    if knob == "args":
        return value if value else "no arguments"
    return f"{knob} {str(value).lower() if isinstance(value, bool) else value}"


def _variant(changes: Sequence[Tuple[str, Any]], base: Sequence[Tuple[str, Any]]) -> Variant:
    knobs: Dict[str, Any] = {}
    args: List[str] = []
    for knob, value in changes:
        if knob == "args":
            args += shlex.split(value)
        elif knob in KNOBS:
            knobs[knob] = value
        else:
            args += [f"--{knob}", str(value).lower() if isinstance(value, bool) else str(value)]
    changed = [(k, v) for (k, v), (_, b) in zip(changes, base) if repr(v) != repr(b)]
    name = ", ".join(_words(k, v) for k, v in changed) or "base"
    return Variant(name, knobs, args, tuple(changes))


def variant_of(changes: Sequence[Tuple[str, Any]]) -> Variant:
    """The variant that makes ``changes`` to the script as it is (a base that sets no knob).

    Example
    -------
    >>> variant_of([("num_workers", 2)]).knobs
    {'num_workers': 2}
    """
    for knob, value in changes:
        _check_value(knob, value, f"{knob}: {value!r}")
    return _variant(changes, [(k, object()) for k, _ in changes])


def variants(specs: Sequence[str], one_at_a_time: bool = False) -> List[Variant]:
    """The variants of ``specs``, the base first (each knob at its first value); see the module docstring."""
    parsed = [parse_spec(s) for s in specs]
    if not parsed:
        raise ConfigError("give at least one --vary \"KNOB: [BASE, OTHER...]\"")
    knobs = [k for k, _ in parsed]
    twice = sorted({k for k in knobs if knobs.count(k) > 1})
    if twice:
        raise ConfigError(f"--vary: the knob {twice[0]!r} is given twice; give all its values in one --vary")
    base = [(k, values[0]) for k, values in parsed]
    if one_at_a_time:
        combos = [base] + [base[:i] + [(k, v)] + base[i + 1:] for i, (k, values) in enumerate(parsed)
                           for v in values[1:]]
    else:
        combos = [list(zip(knobs, values)) for values in itertools.product(*(v for _, v in parsed))]
        combos.sort(key=lambda c: sum(repr(v) != repr(b) for (_, v), (_, b) in zip(c, base)))  # base, singles, ...
    return [_variant(c, base) for c in combos]
