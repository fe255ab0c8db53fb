"""The grid of a profiling sweep and SpeechBrain's historic "triangle" pruning (pure, no torch).

A sweep measures every (audio length, batch size) pair for each setting
(device, thread count). The heavy corner of long audio in big batches is
what takes most of the time, so SpeechBrain's profiling recipe skipped it:
the cell at length index ``d`` and batch index ``b`` (both counted from 0, in
the order the YAML lists them) is skipped when ``d > 0``, ``b > 0`` and
``d + b >= (number of lengths + number of batch sizes) / 2``.

For the default grid (lengths 1, 2, 5, 8, 32 s; batch sizes 1, 4, 8) that
keeps the first row and the first column whole and drops five cells: see
:func:`grid_picture`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from sbprof.record import Cell


@dataclass(frozen=True)
class GridPoint:
    """One (audio length, batch size) pair of the grid.

    Arguments
    ---------
    audio_s : float
        Seconds of audio in each utterance of the batch.
    batch_size : int
        Utterances per batch.
    length_index, batch_index : int
        Positions in the configured lists (the triangle rule uses them).
    skipped : bool
        Pruned by the triangle rule: recorded as ``skipped``, never measured.
    """

    audio_s: float
    batch_size: int
    length_index: int
    batch_index: int
    skipped: bool = False


def triangle_skipped(length_index: int, batch_index: int, n_lengths: int, n_batches: int) -> bool:
    """Whether the historic triangle rule skips the cell at these indices.

    Example
    -------
    >>> triangle_skipped(0, 2, 5, 3), triangle_skipped(2, 2, 5, 3), triangle_skipped(3, 1, 5, 3)
    (False, True, True)
    """
    return (
        length_index > 0
        and batch_index > 0
        and length_index + batch_index >= (n_lengths + n_batches) / 2
    )


def make_grid(audio_secs: Sequence[float], batch_sizes: Sequence[int], triangle_only: bool) -> List[GridPoint]:
    """All cells, length-major, with ``skipped`` set by the triangle rule when asked.

    Example
    -------
    >>> cells = make_grid([1, 2, 5, 8, 32], [1, 4, 8], triangle_only=True)
    >>> len(cells), sum(c.skipped for c in cells)
    (15, 5)
    >>> [(c.audio_s, c.batch_size) for c in cells if c.skipped][:2]
    [(5, 8), (8, 4)]
    """
    n_l, n_b = len(audio_secs), len(batch_sizes)
    return [
        GridPoint(
            audio_s=a,
            batch_size=b,
            length_index=d,
            batch_index=j,
            skipped=triangle_only and triangle_skipped(d, j, n_l, n_b),
        )
        for d, a in enumerate(audio_secs)
        for j, b in enumerate(batch_sizes)
    ]


def cell_label(cell: Cell) -> str:
    """Human-readable name of a sweep cell.

    Example
    -------
    >>> cell_label(Cell(model="m", device="cpu", threads=2, audio_s=1.5, batch_size=4))
    'm cpu 2t 1.5s x4'
    >>> cell_label(Cell(model="m", device="cpu", threads=2, audio_s=1.5, batch_size=4, run=2))
    'm cpu 2t 1.5s x4 run 3'
    """
    run = f" run {cell.run + 1}" if cell.run else ""
    return f"{cell.model} {cell.device} {cell.threads}t {cell.audio_s:g}s x{cell.batch_size}{run}"


def format_seconds(seconds: float) -> str:
    """``1`` for whole seconds, ``0.5`` otherwise, followed by `` s``.

    Example
    -------
    >>> format_seconds(2.0), format_seconds(0.25)
    ('2 s', '0.25 s')
    """
    return f"{seconds:g} s"


def grid_picture(audio_secs: Sequence[float], batch_sizes: Sequence[int], triangle_only: bool) -> str:
    """ASCII picture of which cells are measured (``M``) and skipped (``.``).

    Example
    -------
    >>> print(grid_picture([1, 2, 5, 8, 32], [1, 4, 8], triangle_only=True))
    audio \\ batch    1    4    8
    1 s              M    M    M
    2 s              M    M    M
    5 s              M    M    .
    8 s              M    .    .
    32 s             M    .    .
    """
    cells = make_grid(audio_secs, batch_sizes, triangle_only)
    head = "audio \\ batch"
    width = max([len(head)] + [len(format_seconds(a)) for a in audio_secs])
    col = max(5, max(len(str(b)) for b in batch_sizes) + 2)
    lines = [head.ljust(width) + "".join(str(b).rjust(col) for b in batch_sizes)]
    for d, a in enumerate(audio_secs):
        row = cells[d * len(batch_sizes):(d + 1) * len(batch_sizes)]
        marks = "".join(("." if c.skipped else "M").rjust(col) for c in row)
        lines.append(format_seconds(a).ljust(width) + marks)
    return "\n".join(lines)
