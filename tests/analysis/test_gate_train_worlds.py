"""``sbprof compare`` on two real ``sbprof train --world_sizes`` folders, by peak memory: a world's record holds no
memory figure (its ranks do), so it is listed as not compared rather than "failed"; every rank row names its rank;
the footer does not suggest ``--within-run`` when it was passed."""
from __future__ import annotations

import json

import pytest

from helpers.train_tiny import TINY_MODEL
from sbprof.cli import main
from sbprof.results import load_results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """Two separate real runs of one world of 2 ranks (torchrun, gloo, one thread each)."""
    base = tmp_path_factory.mktemp("worlds")
    folders = []
    for name in ("a", "b"):
        tree = {"model": TINY_MODEL, "data": {"batch_size": 4, "num_batches": 2, "scale": 0.05, "sample_rate": 16000},
                "warmup": 1, "measured": 2, "cpu_threads": 1, "devices": "cpu", "variants": ["ctc"],
                "scaling": ["strong"], "world_sizes": [2], "output_folder": str(base / name)}
        config = base / f"{name}.yaml"
        config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in tree.items()))
        assert main(["train", str(config), "--noprogressbar"]) == 0
        folders.append(base / name)
    return folders


def test_world_rows_are_not_failed_and_rank_rows_name_their_rank(worlds, capsys):
    records = load_results(worlds[0]).records
    assert all(m.ok for m in records) and sorted(m.cell.rank is None for m in records) == [False, False, True]
    world = next(m for m in records if m.cell.rank is None)
    assert world.memory is None or world.memory.peak_rss_bytes is None  # the world holds no memory figure
    capsys.readouterr()
    code = main(["compare", *map(str, worlds), "--metric", "peak_memory", "--within-run"])
    out = capsys.readouterr().out
    assert code == 2, out  # one run a side: not judged, which is exit 2
    rows = [line for line in out.splitlines() if line.startswith("| ctc")]
    assert [r.split("|")[1].strip() for r in rows] == ["ctc cpu/1t x2 scaling=strong world_size=2 rank 0",
                                                       "ctc cpu/1t x2 scaling=strong world_size=2 rank 1"]
    assert all(r.split("|")[2].strip() == "too few runs" for r in rows)
    assert "failed" not in out and "no measured run" not in out
    assert ("not compared, no peak_memory figure on both sides (a training world's record, say: its ranks hold the "
            "figures): ctc cpu/1t x2 scaling=strong world_size=2\n") in out
    assert "pass --within-run" not in out and "a within-run comparison was allowed" in out


def test_without_within_run_the_footer_suggests_it(worlds, capsys):
    capsys.readouterr()
    assert main(["compare", *map(str, worlds), "--metric", "peak_memory"]) == 2
    assert "or pass --within-run for a labelled within-run comparison." in capsys.readouterr().out
