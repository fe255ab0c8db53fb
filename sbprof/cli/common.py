"""What every subcommand shares: exit codes, one-line errors, polite interruption, a job run in its locked folder."""
from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

EXIT_OK = 0
EXIT_FAILED = 1
"""The job could not go on (a model that does not load, a full disk)."""
EXIT_CONFIG = 2
"""Bad input (configuration, command line, results file, output folder in use): nothing measured."""
EXIT_INTERRUPTED = 130

T = TypeVar("T")


def error(message: str) -> None:
    """One line on standard error, ``sbprof: error: ...``."""
    print(f"sbprof: error: {' '.join(str(message).split())}", file=sys.stderr)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """A polite kill (SIGTERM) stops the run like Ctrl-C: workers stopped, finished results kept.

    Python lets only the main thread install handlers; elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_recipe(script: str, module: str, prog: str) -> int:
    """Run a recipe script (``recipes/<name>.py``): ``module``'s ``main`` with the script's arguments.

    The recipes folder holds ``profile.py``, which would shadow the standard
    library's ``profile`` module (``cProfile`` imports it, and torch's compiler
    stack imports ``cProfile``) for every script run from that folder; the
    folder is taken off ``sys.path`` first.
    """
    folder = os.path.realpath(os.path.dirname(script))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != folder]
    return importlib.import_module(module).main(sys.argv[1:], prog=prog)


def print_outputs(outputs: Dict[str, Path]) -> None:
    """One ``name: path`` line per file a command wrote."""
    for name, path in outputs.items():
        print(f"{name}: {path}")


def render_only(target: str, rest: List[str], render: Callable[[str], Dict[str, Path]]) -> int:
    """``--render-only RESULTS``: re-render saved results, nothing measured; bad input is one line and exit 2.

    ``render`` reads ``target`` (a results.json or its folder), writes the reports and returns what it wrote;
    it raises :class:`~sbprof.errors.SbprofError` for a file it cannot render.
    """
    from sbprof.errors import SbprofError

    if rest:
        error(f"--render-only takes no other arguments, got {' '.join(rest)}")
        return EXIT_CONFIG
    try:
        outputs = render(target)
    except SbprofError as exc:
        error(str(exc))
        return EXIT_CONFIG
    print_outputs(outputs)
    return EXIT_OK


def job_config(rest: List[str], keys: Sequence[str], flags: Sequence[str], values: Sequence[str],
               loader: str) -> Optional[Any]:
    """Parse ``CONFIG.yaml [--key value ...]`` and load the job's configuration.

    ``loader`` names the loading function, ``"package.module:function"``, called as ``function(path,
    overrides, run_options)``; it is imported only once the command line parsed, so a mistyped option
    answers at once. On bad input: one line on standard error, and None (the caller exits with
    :data:`EXIT_CONFIG`).
    """
    from sbprof.cli.overrides import parse_command_line
    from sbprof.errors import ConfigError

    try:
        path, overrides, options = parse_command_line(rest, keys, flags, values)
        module, _, function = loader.partition(":")
        return getattr(importlib.import_module(module), function)(path, overrides, options)
    except ConfigError as exc:
        error(str(exc))
        return None


def run_in_folder(output_folder: str, run: Callable[[Path], T], kept: str) -> Tuple[int, Optional[T]]:
    """Make and lock ``output_folder``, then ``run(folder)``; returns (exit code, what ``run`` returned).

    Whatever stops the job becomes one line on standard error and an exit code: Ctrl-C or SIGTERM
    :data:`EXIT_INTERRUPTED` (the finished ``kept`` stay in the folder), a folder that cannot be used or
    is in use :data:`EXIT_CONFIG`, a job that could not go on (a model that does not load, a full disk)
    :data:`EXIT_FAILED`.
    """
    from sbprof.errors import ConfigError, SbprofError
    from sbprof.results import FolderInUse, FolderLock, prepare_output_folder

    try:
        folder = prepare_output_folder(output_folder)
        with sigterm_interrupts(), FolderLock(folder):
            return EXIT_OK, run(folder)
    except KeyboardInterrupt:
        error(f"interrupted; finished {kept} are kept in {output_folder}; run the same command to resume")
        return EXIT_INTERRUPTED, None
    except (ConfigError, FolderInUse) as exc:
        error(str(exc))
        return EXIT_CONFIG, None
    except (SbprofError, OSError) as exc:
        error(str(exc))
        return EXIT_FAILED, None
