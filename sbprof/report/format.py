"""How numbers and statuses read in every renderer (one place, so all outputs agree)."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Protocol

from tabulate import tabulate

from sbprof.analysis.machine_facts import UNKNOWN, MachineFacts
from sbprof.base.stats import GB

MESSAGE_CHARS = 40
"""Failed cells show at most this many characters of their message (results.json keeps it whole)."""

STATUS_LABELS: Dict[str, str] = {"skipped": "skipped", "oom": "OOM", "error": "error"}
"""What a cell of each non-``ok`` status shows instead of a number."""


def sig3(x: float) -> str:
    """Three significant digits without exponent for ordinary sizes, ``1.23E-05`` for tiny ones.

    Example
    -------
    >>> sig3(0.012345), sig3(81.26), sig3(1234.5), sig3(0.0000123)
    ('0.0123', '81.3', '1234', '1.23E-05')
    """
    if x == 0:
        return "0"
    if abs(x) < 1e-4:
        return f"{x:.2E}"
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def bytes_in(unit: str, n: Optional[float]) -> str:
    """Bytes in a table's unit (``GB`` or ``MB``, decimal), three decimals; ``n/a`` when not measured.

    Example
    -------
    >>> bytes_in("GB", 1_234_567_890), bytes_in("MB", 5e6), bytes_in("GB", None)
    ('1.235', '5.000', 'n/a')
    """
    if n is None:
        return "n/a"
    return f"{n / {'GB': GB, 'MB': 1e6}[unit]:.3f}"


class HasStatus(Protocol):
    """Anything with a record's ``status`` (``ok``, ``skipped``, ``oom``, ``error``) and ``message``."""

    status: str
    message: str


def status_text(m: Optional[HasStatus]) -> Optional[str]:
    """What a cell shows instead of a number, or ``None`` when it has numbers.

    Example
    -------
    >>> from sbprof.analysis.sweep import SweepCell
    >>> status_text(SweepCell(status="oom", runs=0))
    'OOM'
    >>> status_text(SweepCell(status="error", runs=0, message="ValueError: bad | shape"))
    'error: ValueError: bad / shape'
    """
    if m is None:
        return "not measured"
    if m.status == "ok":
        return None
    label = STATUS_LABELS[m.status]
    if m.status != "error":
        return label
    # A "|" would end the markdown cell early.
    text = " ".join(m.message.split()).replace("|", "/")
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    return f"{label}: {text}"


def known(value: object) -> str:
    """A recorded value as text, ``?`` where none was recorded.

    Example
    -------
    >>> known(16), known(None)
    ('16', '?')
    """
    return "?" if value is None else str(value)


def _fact(value: object) -> str:
    # None, "" and 0 cores are what an environment holds when it could not tell.
    return UNKNOWN if value in (None, "", 0) else str(value)


def machine_line(m: MachineFacts) -> str:
    """The machine of every report's header, in one form: CPU and logical cores; GPU (and CUDA) or ``no GPU``;
    torch, torchaudio, speechbrain and Python versions; ``unknown`` where the results file does not say.

    Example
    -------
    >>> machine_line(MachineFacts(cpu="Xeon", cpu_count=16, gpu=None, torch="2.14.1", torchaudio="2.11.0",
    ...                           speechbrain="1.1.2", python="3.11.7"))
    'Xeon (16 logical cores); no GPU; torch 2.14.1, torchaudio 2.11.0, speechbrain 1.1.2, Python 3.11.7'
    >>> line = machine_line(MachineFacts(cpu="EPYC", gpu="H100", cuda="13.0", torch="2.14.1"))
    >>> line.split("; ")[:2], "torchaudio unknown" in line
    (['EPYC (unknown logical cores)', 'H100 (CUDA 13.0)'], True)
    >>> machine_line(MachineFacts()).split("; ")[:2]
    ['unknown (unknown logical cores)', 'GPU unknown']
    """
    if m.gpu is None:
        gpu = "no GPU"
    elif m.gpu == UNKNOWN:
        gpu = f"GPU {UNKNOWN}"
    else:
        gpu = f"{m.gpu} (CUDA {_fact(m.cuda)})"
    return (f"{_fact(m.cpu)} ({_fact(m.cpu_count)} logical cores); {gpu}; torch {_fact(m.torch)}, "
            f"torchaudio {_fact(m.torchaudio)}, speechbrain {_fact(m.speechbrain)}, Python {_fact(m.python)}")


def plural(n: int, word: str, many: str = "") -> str:
    """``1 batch`` / ``2 batches``.

    Example
    -------
    >>> plural(1, "thread"), plural(2, "warm-up batch", "warm-up batches")
    ('1 thread', '2 warm-up batches')
    """
    return f"{n} {word if n == 1 else many or word + 's'}"


def table(rows: List[List[str]], headers: List[str]) -> str:
    """A github-format table of already formatted cells."""
    # disable_numparse: cells are already formatted; tabulate must not re-round them.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=["left"] * len(headers))
