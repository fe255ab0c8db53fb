"""Batching modes: every utterance exactly once, frame budget respected, padding counted."""
from __future__ import annotations

import pytest

from sbprof.base.errors import ConfigError
from sbprof.transducer.batching import Batch, bucket_batches, fixed_batches, padding_summary
from sbprof.models.utterances import sample_shapes

SHAPES = sample_shapes(503, seed=3)


def _all_indices(batches):
    return sorted(i for b in batches for i in b.indices)


def test_fixed_batches_hold_every_utterance_once_in_seeded_random_order():
    batches = fixed_batches(SHAPES, 16, seed=5)
    assert _all_indices(batches) == list(range(len(SHAPES)))
    assert [b.size for b in batches] == [16] * 31 + [7]
    assert all(b.shapes == tuple(SHAPES[i] for i in b.indices) for b in batches)
    assert fixed_batches(SHAPES, 16, seed=5) == batches
    assert fixed_batches(SHAPES, 16, seed=6) != batches
    assert list(batches[0].indices) != list(range(16))  # shuffled, not in file order


@pytest.mark.parametrize("max_frames", [680, 2000, 10000])
def test_buckets_respect_the_padded_frame_budget_and_lose_nothing(max_frames):
    batches = bucket_batches(SHAPES, max_frames, seed=1)
    assert _all_indices(batches) == list(range(len(SHAPES)))
    assert all(b.size * max(t for t, _ in b.shapes) <= max_frames for b in batches)
    # Greedy in sorted order: adding the next-longer utterance would have broken the budget.
    ordered = sorted(batches, key=lambda b: min(t for t, _ in b.shapes))
    for this, following in zip(ordered, ordered[1:]):
        assert (this.size + 1) * min(t for t, _ in following.shapes) > max_frames


def test_buckets_refuse_an_utterance_longer_than_the_budget():
    with pytest.raises(ConfigError, match="longest utterance"):
        bucket_batches([(10, 1), (50, 2)], 40)


def test_padding_counts_frames_and_lattice_cells():
    batch = Batch((0, 1), ((10, 2), (6, 4)))
    assert (batch.frames, batch.padded_frames) == (16, 20)
    assert (batch.lattice_cells, batch.padded_lattice_cells) == (10 * 3 + 6 * 5, 2 * 10 * 5)
    summary = padding_summary([batch])
    assert summary["frame_padding"] == pytest.approx(4 / 20)
    assert summary["lattice_padding"] == pytest.approx((100 - 60) / 100)
    # Sorting by duration pads far less than random order.
    assert (padding_summary(bucket_batches(SHAPES, 2000))["frame_padding"]
            < padding_summary(fixed_batches(SHAPES, 6))["frame_padding"] / 4)
