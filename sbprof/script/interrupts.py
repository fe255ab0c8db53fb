"""Ctrl-C once the script has ended: what was recorded is still saved and reported.

After the script, ``sbprof run`` closes its trace, probes the peak FLOP/s
(once per machine), analyses the stages and writes ``results.json`` and
``report.md``. An interrupt (SIGINT) during the probe ends the probe (the
share of peak reads n/a, and says why); during the rest it is held until
both files are written, then the run exits with 130, as an interrupted
script does. Only the main thread can take signals; elsewhere nothing changes.

Example
-------
>>> import os, signal
>>> after = AfterScript(log=lambda line: print("sbprof:", line))
>>> after.arm()
>>> os.kill(os.getpid(), signal.SIGINT)
sbprof: interrupted: finishing results.json and report.md of what was recorded (they are written first)
>>> after.restore(); after.hit
True
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator, Optional


class AfterScript:
    """The SIGINT handler between the script's end and the written report (see the module docstring)."""

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.hit = False
        self.held = False  # the caller restores the handler itself, once the reports are written
        self._probing = False
        self._previous: Any = None
        self._armed = False

    def arm(self) -> None:
        if self._armed or threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._armed = True

    def _handle(self, signum: int, frame: Optional[object]) -> None:
        self.hit = True
        if self._probing:
            raise KeyboardInterrupt
        self.log("interrupted: finishing results.json and report.md of what was recorded (they are written "
                 "first)")

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """A block an interrupt ends (the peak probe): it raises ``KeyboardInterrupt`` there, as Python does."""
        self._probing = True
        try:
            yield
        finally:
            self._probing = False

    def restore(self) -> None:
        """Give SIGINT back its handler from before :meth:`arm`."""
        if self._armed:
            signal.signal(signal.SIGINT, self._previous)
            self._armed = False
