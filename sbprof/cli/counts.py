"""``sbprof flops``, ``sbprof params``, ``sbprof modules``: FLOPs, parameters, per-module time of one model.

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
(``--json``: the result's JSON instead). Exit codes: 0 done, 1 the model
cannot be built, 2 bad input (unknown target, an input that does not fit the
model).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, List, Union

from sbprof.cli.common import Parser
from sbprof.cli.job import show_report
from sbprof.counts.target import COMMANDS, CountsConfig, check_audio, parse_shapes, resolve_target

if TYPE_CHECKING:
    from sbprof.jobs.runner import Outcome

DEFAULT_THREADS = os.cpu_count() or 1


def parser(command: str, prog: str) -> Parser:
    p = Parser(prog=prog, description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("target", nargs="?",
                   help="a local sbprof model, a pretrained-interface folder, or a HyperPyYAML file")
    p.add_argument("--render-only", metavar="RESULTS", help="re-render a saved count's report without measuring")
    p.add_argument("--type", help="pretrained interface class of a folder (EncoderASR, EncoderClassifier, ...)")
    p.add_argument("--key", help="YAML entry holding the module (dotted for nested entries, e.g. modules.encoder)")
    p.add_argument("--depth", type=int, default=2, help="module rows shown down to this depth (default 2)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--output_folder", help="where results.json and report.md go (default results/<command>/<target>)")
    p.add_argument("--json", action="store_true", help="print the result's JSON instead of the report")
    if command != "params":
        p.add_argument("--input", help="input shapes of a module, YAML: '[4, 100, 80]' or '[[4, 100], [4]]'")
        p.add_argument("--audio_s", type=float, default=4.0, help="seconds per utterance for an interface")
        p.add_argument("--batch_size", type=int, default=1, help="utterances per batch for an interface")
        p.add_argument("--backward", action="store_true", help="also run the backward of a module's outputs")
        p.add_argument("--seed", type=int, default=1234)
    if command == "modules":
        p.add_argument("--select", nargs="+", default=["default"],
                       help="modules to time: 'default', name globs or type:ClassName (default: default)")
        p.add_argument("--steps", type=int, default=3, help="timed calls after one warm-up call (default 3)")
        p.add_argument("--memory", action="store_true", help="one more call under torch's MemTracker")
    return p


def parse(argv: List[str], prog: str) -> Union[CountsConfig, int]:
    """The command line as a :class:`CountsConfig`, or the exit code of a command that answered by itself."""
    from sbprof.base.errors import ConfigError
    from sbprof.jobs.preamble import Preamble, Repeats, check_devices, check_output_folder

    command = prog.split()[-1] if prog.split()[-1] in COMMANDS else "flops"
    args = parser(command, prog).parse_args(argv)
    if args.render_only:
        from sbprof.cli.job import render_only
        from sbprof.jobs.registry import get_job

        return render_only(get_job(command), args.render_only, [args.target] if args.target else [])
    if args.target is None:
        raise ConfigError(f"{prog}: give the TARGET to count (a local model, a folder or a YAML file)")
    if args.depth < 0:
        raise ConfigError(f"--depth must be at least 0, got {args.depth}")
    source = resolve_target(args.target, args.type, args.key)
    options: dict = {}
    if command != "params":
        if args.input is not None and not source.is_module:
            raise ConfigError(f"--input is for a module; {args.target} is a pretrained interface, fed --batch_size "
                              "utterances of --audio_s seconds of noise")
        check_audio(args.audio_s, args.batch_size)
        options = dict(input=parse_shapes(args.input) if args.input else None, audio_s=args.audio_s,
                       batch_size=args.batch_size, backward=args.backward)
    if command == "modules":
        if args.steps < 1:
            raise ConfigError(f"--steps must be at least 1, got {args.steps}")
        options.update(select=tuple(args.select), steps=args.steps, memory=args.memory)
    default = str(Path("results") / command / Path(args.target).stem)
    preamble = Preamble(devices=check_devices(args.device, "--device"), cpu_threads=(DEFAULT_THREADS,),
                        cuda_threads=DEFAULT_THREADS, seed=getattr(args, "seed", 1234), warmup=0, measured=1,
                        repeats=Repeats(runs=1),
                        output_folder=check_output_folder(args.output_folder, "--output_folder", default),
                        progress_bar=False)
    return CountsConfig(preamble=preamble, command=command, target=args.target, source=source, depth=args.depth,
                        json=args.json, **options)


def show(cfg: CountsConfig, outcome: Outcome) -> None:
    """Print the count: its report, or with ``--json`` the result as JSON."""
    if not cfg.json:
        show_report(cfg, outcome)
        return
    from sbprof.results import load_results

    (record,) = load_results(outcome.results).records
    print(json.dumps({"command": cfg.command, "target": cfg.target, "input": record.settings.get("input"),
                      "result": record.extra.get("result")}, indent=1))
