"""The count jobs ``flops``, ``params`` and ``modules``: their command line, their configuration, their parts.

Usage::

    sbprof flops   TARGET [--type CLASS] [--key NAME] [--input SHAPES] [--backward] [--audio_s S] [--batch_size N]
    sbprof params  TARGET [--type CLASS] [--key NAME] [--depth D]
    sbprof modules TARGET [...as flops] [--select PATTERN ...] [--steps N] [--memory]
    sbprof flops | params | modules --render-only RESULTS

TARGET is a local sbprof model (``encoder_asr``...), a pretrained-interface
folder (with ``--type EncoderASR``; without it, ``--key`` picks a module of its
``hyperparams.yaml``), or a HyperPyYAML file defining a module (``--key``,
dotted for nested entries; default ``model``, or the file's only entry). An
interface is called as the profiling recipe calls it, on ``--batch_size``
utterances of ``--audio_s`` seconds of seeded noise; a module on random
tensors of the ``--input`` shapes (YAML, e.g. ``"[[4, 100, 80]]"``).

The target is counted in a worker process by the one runner: the record
goes to ``results.json`` in ``--output_folder`` (default
``results/<command>/<target>``) with ``report.md``, which is printed
(``--json``: the result's JSON instead). From Python the options are a mapping,
``sbprof.run("flops", {"target": "model.yaml", "input": "[4, 16]"})``.
Exit codes: 0 done, 1 the model cannot be built, 2 bad input (unknown target,
an input that does not fit the model).
"""
from __future__ import annotations

import argparse
import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from sbprof.analysis.counts import analyse
from sbprof.base.checks import check_int, nearest
from sbprof.base.errors import ConfigError
from sbprof.jobs.job import ArgumentParser, Invocation, Job, written_report
from sbprof.report.counts import render

if TYPE_CHECKING:
    from sbprof.counts.target import CountsConfig
    from sbprof.jobs.outcome import Outcome

DEFAULT_THREADS = os.cpu_count() or 1
COMMON: Dict[str, Any] = {"target": None, "type": None, "key": None, "depth": 2, "device": "cpu",
                          "output_folder": None, "json": False}
"""Every count command's options and their defaults (the command line's and :func:`sbprof.run`'s)."""
INPUT: Dict[str, Any] = {"input": None, "audio_s": 4.0, "batch_size": 1, "backward": False, "seed": 1234}
"""The options of the commands that run the model (``flops``, ``modules``)."""
MODULES: Dict[str, Any] = {"select": ("default",), "steps": 3, "memory": False}


def defaults(command: str) -> Dict[str, Any]:
    """The options ``command`` takes, with their defaults.

    Example
    -------
    >>> sorted(defaults("params"))
    ['depth', 'device', 'json', 'key', 'output_folder', 'target', 'type']
    """
    return {**COMMON, **(INPUT if command != "params" else {}), **(MODULES if command == "modules" else {})}


def parser(command: str, prog: str) -> ArgumentParser:
    """The command line of ``sbprof COMMAND``: only the options given land in the namespace (the defaults are
    :func:`defaults`', applied by :func:`load_config`)."""
    p = ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], allow_abbrev=False,
                       argument_default=argparse.SUPPRESS)
    p.add_argument("target", nargs="?",
                   help="a local sbprof model, a pretrained-interface folder, or a HyperPyYAML file")
    p.add_argument("--render-only", metavar="RESULTS", help="re-render a saved count's report without measuring")
    p.add_argument("--type", help="pretrained interface class of a folder (EncoderASR, EncoderClassifier, ...)")
    p.add_argument("--key", help="YAML entry holding the module (dotted for nested entries, e.g. modules.encoder)")
    p.add_argument("--depth", type=int, help="module rows shown down to this depth (default 2)")
    p.add_argument("--device", help="cpu or cuda:N (default cpu)")
    p.add_argument("--output_folder", help="where results.json and report.md go (default results/<command>/<target>)")
    p.add_argument("--json", action="store_true", help="print the result's JSON instead of the report")
    if command != "params":
        p.add_argument("--input", help="input shapes of a module, YAML: '[4, 100, 80]' or '[[4, 100], [4]]'")
        p.add_argument("--audio_s", type=float, help="seconds per utterance for an interface (default 4)")
        p.add_argument("--batch_size", type=int, help="utterances per batch for an interface (default 1)")
        p.add_argument("--backward", action="store_true", help="also run the backward of a module's outputs")
        p.add_argument("--seed", type=int, help="seed of the random inputs (default 1234)")
    if command == "modules":
        p.add_argument("--select", nargs="+",
                       help="modules to time: 'default', name globs or type:ClassName (default: default)")
        p.add_argument("--steps", type=int, help="timed calls after one warm-up call (default 3)")
        p.add_argument("--memory", action="store_true", help="one more call under torch's MemTracker")
    return p


def parse(command: str, argv: List[str], prog: str) -> Invocation:
    """``sbprof COMMAND ...`` as the options :func:`load_config` takes, or the folder to re-render."""
    options = vars(parser(command, prog).parse_args(argv))
    render_only = options.pop("render_only", None)
    if render_only is not None:
        if options.get("target") is not None:
            raise ConfigError(f"--render-only takes no other arguments, got {options['target']}")
        return Invocation(render_only=render_only)
    if options.get("target") is None:
        raise ConfigError(f"{prog}: give the TARGET to count (a local model, a folder or a YAML file)")
    return Invocation(source=options)


def _checked(command: str, given: Mapping[str, Any]) -> Dict[str, Any]:
    """``given`` over the defaults, each option of the right kind (one ConfigError naming it otherwise)."""
    known = defaults(command)
    out = dict(known)
    for key, value in given.items():
        if key not in known:
            raise ConfigError(f"sbprof {command}: unknown option {key!r}{nearest(key, list(known))}; options: "
                              f"{', '.join(known)}")
        default = known[key]
        kinds: Tuple[type, ...] = (type(default),) if default is not None and not isinstance(default, tuple) else ()
        if isinstance(default, float):
            kinds = (int, float)
        if isinstance(default, tuple):
            kinds = (list, tuple)
        if key == "input":
            kinds = (str, list, tuple)
        if default is None and key != "input":
            kinds = (str,)
        if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise ConfigError(f"sbprof {command}: option {key} takes a {' or '.join(k.__name__ for k in kinds)}, "
                              f"not {value!r}")
        out[key] = value
    return out


def load_config(command: str, source: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None) -> "CountsConfig":
    """The checked configuration of ``sbprof COMMAND`` from its options (``source``, then ``overrides``); the run
    options are ``device`` and the flags ``retry_failed``, ``noprogressbar`` (a count shows no bar)."""
    from sbprof.counts.target import CountsConfig, check_audio, parse_shapes, resolve_target
    from sbprof.jobs.preamble import Preamble, Repeats, check_devices, check_output_folder

    if not isinstance(source, Mapping):
        raise ConfigError(f"sbprof {command}: give the options as a mapping, e.g. {{'target': 'model.yaml'}}, "
                          f"not {source!r}")
    run_options = dict(run_options or {})
    args = _checked(command, {**source, **(overrides or {}),
                              **({"device": run_options["device"]} if "device" in run_options else {})})
    if args["target"] is None:
        raise ConfigError(f"sbprof {command}: give the TARGET to count (a local model, a folder or a YAML file)")
    check_int(args["depth"], "--depth", 0)
    target = args["target"]
    model = resolve_target(target, args["type"], args["key"])
    options: Dict[str, Any] = {}
    if command != "params":
        shapes = args["input"]
        if shapes is not None and not model.is_module:
            raise ConfigError(f"--input is for a module; {target} is a pretrained interface, fed --batch_size "
                              "utterances of --audio_s seconds of noise")
        check_audio(args["audio_s"], args["batch_size"])
        text = shapes if shapes is None or isinstance(shapes, str) else json.dumps(list(shapes))
        options = dict(input=parse_shapes(text) if text else None, audio_s=float(args["audio_s"]),
                       batch_size=args["batch_size"], backward=args["backward"])
    if command == "modules":
        check_int(args["steps"], "--steps", 1)
        options.update(select=tuple(args["select"]), steps=args["steps"], memory=args["memory"])
    default = str(Path("results") / command / Path(target).stem)
    preamble = Preamble(devices=check_devices(args["device"], "--device"), cpu_threads=(DEFAULT_THREADS,),
                        cuda_threads=DEFAULT_THREADS, warmup=0, measured=1,
                        seed=check_int(args.get("seed", 1234), "--seed", 0, maximum=2**32 - 1),
                        repeats=Repeats(runs=1),
                        output_folder=check_output_folder(args["output_folder"], "--output_folder", default),
                        progress_bar=False, retry_failed=bool(run_options.get("retry_failed", False)))
    return CountsConfig(preamble=preamble, command=command, target=target, source=model, depth=args["depth"],
                        json=args["json"], **options)


def plan(cfg: "CountsConfig") -> Any:
    """The one cell of the count (:mod:`sbprof.counts.plan`, imported now: it needs torch)."""
    from sbprof.counts.plan import Plan

    return Plan(cfg)


def show(cfg: "CountsConfig", outcome: "Outcome") -> Optional[str]:
    """What the command prints: the count's report, or with ``--json`` the result as JSON."""
    if not cfg.json:
        return written_report(cfg, outcome)
    from sbprof.results import load_results

    (record,) = load_results(outcome.results).records
    return json.dumps({"command": cfg.command, "target": cfg.target, "input": record.settings.get("input"),
                       "result": record.extra.get("result")}, indent=1)


def _job(command: str, text: str) -> Job:
    return Job(command, text, load_config=partial(load_config, command), plan=plan, analyse=analyse, render=render,
               parse=partial(parse, command), show=show, noun="model")


JOBS = (_job("flops", "FLOPs and MACs of a model's forward (and backward), per module"),
        _job("params", "parameter counts of a model: total, trainable, per submodule"),
        _job("modules", "per-module time of a model's forward and backward (and memory)"))
