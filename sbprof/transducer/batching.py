"""Batching modes of the study: fixed batch size in random order, and duration buckets.

A :class:`Batch` keeps which utterances it holds and what padding costs:
the loss and the joiner run on the padded ``N x T_max x (U_max + 1)``
lattice, so the padded frame count ``N x T_max`` (not ``sum T``) is what a
frame budget must bound.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from sbprof.base.errors import ConfigError

Shape = Tuple[int, int]


@dataclass(frozen=True)
class Batch:
    """Utterances of one batch (indices into the shape list) and their shapes."""

    indices: Tuple[int, ...]
    shapes: Tuple[Shape, ...]

    @property
    def size(self) -> int:
        return len(self.shapes)

    @property
    def t_max(self) -> int:
        return max(t for t, _ in self.shapes)

    @property
    def u_max(self) -> int:
        return max(u for _, u in self.shapes)

    @property
    def frames(self) -> int:
        """Real frames, ``sum T``."""
        return sum(t for t, _ in self.shapes)

    @property
    def padded_frames(self) -> int:
        """Frames including padding, ``N x T_max``."""
        return self.size * self.t_max

    @property
    def lattice_cells(self) -> int:
        """Real lattice cells, ``sum T (U + 1)``."""
        return sum(t * (u + 1) for t, u in self.shapes)

    @property
    def padded_lattice_cells(self) -> int:
        """Cells of the padded lattice, ``N x T_max x (U_max + 1)`` (the logits hold V values per cell)."""
        return self.size * self.t_max * (self.u_max + 1)


def fixed_batches(shapes: Sequence[Shape], batch_size: int, seed: int = 0) -> List[Batch]:
    """Batches of ``batch_size`` utterances in a seeded random order; the last may be smaller.

    Example
    -------
    >>> batches = fixed_batches([(10, 2), (20, 3), (30, 4)], batch_size=2, seed=0)
    >>> [b.size for b in batches], sorted(i for b in batches for i in b.indices)
    ([2, 1], [0, 1, 2])
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batching.batch_size must be a positive integer, got {batch_size!r}")
    order = list(range(len(shapes)))
    random.Random(seed).shuffle(order)
    return [_batch(shapes, order[i:i + batch_size]) for i in range(0, len(order), batch_size)]


def bucket_batches(shapes: Sequence[Shape], max_frames: int, seed: int = 0) -> List[Batch]:
    """Utterances sorted by duration, cut into batches whose padded frames ``N x T_max`` stay within ``max_frames``.

    Utterances longer than ``max_frames`` alone are refused (no batch could
    hold them). The batches are then shuffled (seeded), as a training loop
    would draw them; within a batch the durations stay close, which keeps
    the padding small.

    Example
    -------
    >>> batches = bucket_batches([(5, 1), (9, 2), (4, 1), (10, 3)], max_frames=20)
    >>> sorted(sorted(b.shapes) for b in batches)
    [[(4, 1), (5, 1)], [(9, 2), (10, 3)]]
    >>> max(b.padded_frames for b in batches) <= 20
    True
    """
    if not isinstance(max_frames, int) or max_frames < 1:
        raise ConfigError(f"batching.max_frames must be a positive integer, got {max_frames!r}")
    longest = max(t for t, _ in shapes)
    if longest > max_frames:
        raise ConfigError(f"batching.max_frames {max_frames} is below the longest utterance ({longest} frames)")
    order = sorted(range(len(shapes)), key=lambda i: (shapes[i][0], shapes[i][1], i))
    batches: List[Batch] = []
    current: List[int] = []
    for i in order:
        # Sorted ascending, so the newcomer sets T_max of the grown batch.
        if current and (len(current) + 1) * shapes[i][0] > max_frames:
            batches.append(_batch(shapes, current))
            current = []
        current.append(i)
    if current:
        batches.append(_batch(shapes, current))
    random.Random(seed).shuffle(batches)
    return batches


def padding_summary(batches: Sequence[Batch]) -> dict:
    """Totals and padding fractions over ``batches`` (frames and lattice cells).

    Example
    -------
    >>> padding_summary([Batch((0, 1), ((2, 1), (4, 1)))])["frame_padding"]
    0.25
    """
    frames = sum(b.frames for b in batches)
    padded = sum(b.padded_frames for b in batches)
    cells = sum(b.lattice_cells for b in batches)
    padded_cells = sum(b.padded_lattice_cells for b in batches)
    return {
        "batches": len(batches),
        "utterances": sum(b.size for b in batches),
        "frames": frames,
        "padded_frames": padded,
        "frame_padding": (padded - frames) / padded if padded else 0.0,
        "lattice_cells": cells,
        "padded_lattice_cells": padded_cells,
        "lattice_padding": (padded_cells - cells) / padded_cells if padded_cells else 0.0,
    }


def _batch(shapes: Sequence[Shape], indices: Sequence[int]) -> Batch:
    return Batch(tuple(indices), tuple(shapes[i] for i in indices))
