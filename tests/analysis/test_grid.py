"""The sweep grid and SpeechBrain's historic triangle rule."""
from __future__ import annotations

import pytest

from sbprof.record import Cell
from sbprof.analysis.grid import cell_label, grid_picture, make_grid, triangle_skipped


def _skipped(lengths, batches):
    return {(c.audio_s, c.batch_size) for c in make_grid(lengths, batches, triangle_only=True) if c.skipped}


def test_default_grid_skips_the_historic_five_cells():
    # d + b >= (5 + 3) / 2 = 4 with d, b > 0: (2,2), (3,1), (3,2), (4,1), (4,2).
    assert _skipped([1, 2, 5, 8, 32], [1, 4, 8]) == {(5, 8), (8, 4), (8, 8), (32, 4), (32, 8)}


@pytest.mark.parametrize(
    "n_lengths, n_batches, expected",
    [
        (2, 2, {(1, 1)}),                      # threshold 2
        (3, 3, {(1, 2), (2, 1), (2, 2)}),      # threshold 3
        (2, 3, {(1, 2)}),                      # threshold 2.5: (1, 1) = 2 stays
        (1, 4, set()),                         # first row always kept
        (4, 1, set()),                         # first column always kept
    ],
)
def test_triangle_rule_by_index(n_lengths, n_batches, expected):
    got = {(d, b) for d in range(n_lengths) for b in range(n_batches)
           if triangle_skipped(d, b, n_lengths, n_batches)}
    assert got == expected


def test_triangle_off_keeps_every_cell_in_length_major_order():
    cells = make_grid([0.5, 1], [1, 2, 4], triangle_only=False)
    assert not any(c.skipped for c in cells)
    assert [(c.audio_s, c.batch_size) for c in cells] == [
        (0.5, 1), (0.5, 2), (0.5, 4), (1, 1), (1, 2), (1, 4)]
    assert [(c.length_index, c.batch_index) for c in cells][4] == (1, 1)


def test_rule_uses_list_positions_not_values():
    # Same positions, other values: same cells go.
    assert _skipped([10, 20], [3, 7]) == {(20, 7)}


def test_picture_matches_the_grid():
    picture = grid_picture([1, 2, 5, 8, 32], [1, 4, 8], triangle_only=True).splitlines()
    assert picture[0].split() == ["audio", "\\", "batch", "1", "4", "8"]
    assert [line.split()[2:] for line in picture[1:]] == [
        ["M", "M", "M"], ["M", "M", "M"], ["M", "M", "."], ["M", ".", "."], ["M", ".", "."]]
    assert "." not in grid_picture([1, 2], [1, 2], triangle_only=False)


def test_cell_label():
    assert cell_label(Cell(model="m", device="cuda:0", threads=8, audio_s=32, batch_size=8)) == "m cuda:0 8t 32s x8"
