"""Run the user's script as ``__main__`` in this process (``runpy``), its own arguments untouched, hooks installed first.

How the script ends is kept (:class:`Ended`): finished, stopped by sbprof
once every stage had its steps, exited (``sys.exit``), raised, interrupted,
or left at once (``os._exit``); the exit status is the one Python would have
given. A script's own error is shown as Python shows it, without sbprof's
frames.

The script's process boundaries are its own: a process it forks never
returns into sbprof (it ends where the script's code ends, with the status
Python would give it, as ``multiprocessing``'s forked children do), so a child
never writes its parent's results; and ``os._exit`` in the script's own
process first lets sbprof save what was recorded (``at_exit``), since nothing
after it runs.
"""
from __future__ import annotations

import importlib.util
import io
import os
import runpy
import sys
import threading
import tokenize
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, NoReturn, Optional

from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import what_is_there

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Target:
    """A script path or a module name (``-m``), and the arguments it gets."""

    path: Optional[str] = None
    module: Optional[str] = None
    args: List[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """What the default output folder is named after: the script's stem, or the module's last part."""
        return Path(self.path).stem if self.path else str(self.module).rsplit(".", 1)[-1]

    @property
    def argv0(self) -> str:
        return self.path if self.path else str(self.module)


def check_target(path: Optional[str], module: Optional[str], args: List[str]) -> Target:
    """The target if it can run; :class:`ConfigError` for a missing script, a non-Python one or a missing module.

    Example
    -------
    >>> check_target("no_such.py", None, [])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: no_such.py: no such script
    """
    if module is not None:
        sys.path.insert(0, os.getcwd())  # as python -m finds it: the working directory first
        try:
            spec = importlib.util.find_spec(module)
        except Exception as exc:  # noqa: B902  # a parent package whose own code raises: python -m says it too
            why = exc if isinstance(exc, (ImportError, ValueError)) else f"{type(exc).__name__}: {exc}"
            raise ConfigError(f"-m {module}: cannot be found ({why})") from None
        finally:
            sys.path.remove(os.getcwd())
        if spec is None:
            raise ConfigError(f"-m {module}: no such module")
        return Target(module=module, args=list(args))
    if path is None:
        raise ConfigError("give the SCRIPT.py to run, or -m MODULE")
    file = Path(path)
    there = what_is_there(file)
    if there != "a regular file":  # a FIFO would block the read for ever; a link loop is no missing script
        raise ConfigError(f"{path}: no such script" if there == "nothing" else f"{path}: it is {there}, not a script")
    try:
        raw = file.read_bytes()
    except OSError as exc:  # a file it may not read
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if b"\0" in raw:
        raise ConfigError(f"{path}: not a Python script (it holds NUL bytes: a binary file?)")
    try:  # in the encoding its coding line (PEP 263) or byte-order mark names, UTF-8 by default, as Python reads it
        source = raw.decode(tokenize.detect_encoding(io.BytesIO(raw).readline)[0])
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a Python script ({exc.__class__.__name__}: not text in the encoding "
                          "Python would read it in)") from None
    if file.suffix != ".py":
        try:
            compile(source, str(file), "exec")
        except (SyntaxError, ValueError):
            raise ConfigError(f"{path}: not a Python script (no .py suffix, and it does not compile)") from None
    return Target(path=str(file), args=list(args))


@dataclass
class Ended:
    """How the script ended: ``finished``, ``stopped``, ``exited``, ``raised``, ``interrupted`` or ``os_exit``."""

    how: str
    exit_code: int = 0
    error: Optional[BaseException] = None
    message: Optional[str] = None  # sys.exit("text"): printed as Python prints it


def run_target(target: Target, stop: type, at_exit: Optional[Callable[[int, bool], None]] = None,
               in_child: Optional[Callable[[], None]] = None) -> Ended:
    """Run ``target`` as ``__main__`` (sys.argv and sys.path[0] as Python sets them); ``stop``: sbprof's stop.

    ``at_exit(status, in_script_thread)`` runs when the script calls ``os._exit(status)`` in this process,
    before the process ends (``in_script_thread``: from the thread the script runs in, not one it started);
    ``in_child()`` runs in each process the script forks, right after the fork (see the module docstring).
    """
    owner, thread, real_exit, running = os.getpid(), threading.get_ident(), os._exit, [True]

    def hard_exit(status: int) -> NoReturn:
        try:
            if at_exit is not None and os.getpid() == owner and running[0]:
                running[0] = False  # once, whichever thread calls it
                at_exit(status, threading.get_ident() == thread)
        finally:
            real_exit(status)

    if in_child is not None:  # fork handlers cannot be removed: this one acts only while the script runs
        os.register_at_fork(after_in_child=lambda: running[0] and in_child())
    os._exit = hard_exit
    try:
        ended = _run(target, stop)
    finally:
        os._exit = real_exit
        if os.getpid() == owner:
            running[0] = False
    if os.getpid() != owner:
        _leave_child(ended, real_exit)
    return ended


def _leave_child(ended: Ended, real_exit: Callable[[int], NoReturn]) -> NoReturn:
    """End a process the script forked where the script's code ended, as Python would end it (its error or
    ``sys.exit`` text printed, its status), never returning into sbprof, which would write the parent's results."""
    if ended.how == "raised" and ended.error is not None:
        print(script_traceback(ended.error), end="", file=sys.stderr)
    elif ended.message is not None:
        print(ended.message, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    real_exit(ended.exit_code)


def _run(target: Target, stop: type) -> Ended:
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [os.path.abspath(target.path) if target.path else target.argv0, *target.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(target.path)) if target.path else os.getcwd())
    try:
        if target.module is not None:
            runpy.run_module(target.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target.path, run_name="__main__")
        return Ended("finished")
    except SystemExit as exc:
        if isinstance(exc.code, str) or (exc.code is not None and not isinstance(exc.code, int)):
            return Ended("exited", 1, message=str(exc.code))
        return Ended("exited", int(exc.code or 0))
    except KeyboardInterrupt as exc:
        return Ended("interrupted", 130, error=exc)
    except BaseException as exc:  # noqa: B902  # the script's own error, shown after the report is written
        if isinstance(exc, stop):
            return Ended("stopped")
        return Ended("raised", 1, error=exc)
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path


def script_traceback(error: BaseException) -> str:
    """The traceback Python would print for the script's error: runpy's and sbprof's frames left out."""
    frames = []
    tb = error.__traceback__
    started = False
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        ours = filename.startswith(HERE + os.sep) or "runpy" in os.path.basename(filename)
        started = started or not ours
        if started and not ours:
            frames.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for tb in reversed(frames):
        rebuilt = types.TracebackType(rebuilt, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    return "".join(traceback.format_exception(type(error), error, rebuilt))
