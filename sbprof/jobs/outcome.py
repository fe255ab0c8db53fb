"""What one run of the runner did (:class:`Outcome`), and SIGTERM read as Ctrl-C while it runs.

Example
-------
>>> from pathlib import Path
>>> o = Outcome(Path("out"), Path("out/results.json"), measured=2, failed=1, cells={("a",), ("b",)})
>>> o.describe("cell"), o.all_failed
('measured 2 cell(s) in 3 runs (1 failed), 0 already done', True)
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple


@dataclass
class Outcome:
    """What one invocation did: records made now (ok or failed), the cells they belong to (a cell's runs count once),
    the records kept from before, and where everything is."""

    folder: Path
    results: Path
    measured: int = 0
    failed: int = 0
    cells: Set[Tuple[Any, ...]] = field(default_factory=set)
    resumed: int = 0
    any_ok: bool = False
    notes: List[str] = field(default_factory=list)
    outputs: Dict[str, Path] = field(default_factory=dict)
    first_failure: str = ""

    def describe(self, noun: str) -> str:
        """``measured 3 cell(s) in 6 runs (0 failed), 2 already done``."""
        runs = self.measured + self.failed
        more = f" in {runs} runs" if runs > len(self.cells) else ""
        return (f"measured {len(self.cells)} {noun}(s){more} ({self.failed} failed), {self.resumed} already done")

    @property
    def all_failed(self) -> bool:
        """Something failed now, and the results file holds no successful record at all."""
        return self.failed > 0 and not self.any_ok


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
