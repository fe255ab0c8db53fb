"""``sbprof train`` scaled out for real: a world_sizes study, each world ``torchrun ... -m sbprof train world.yaml``.

Tiny Conformer + CTC (no BatchNorm: SpeechBrain would convert it to SyncBatchNorm, which fails on CPU modules),
gloo, one thread per rank.
"""
import dataclasses
from pathlib import Path

import pytest

from sbprof.analysis.train import analyse
from sbprof.cli.tools import main as merge_cli
from sbprof.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.report.train import render_train
from sbprof.results import load_results
from sbprof.train.config import validate
from sbprof.train.data import mock_batches
from helpers.train_tiny import TINY_MODEL

pytestmark = pytest.mark.slow
DATA = {"batch_size": 4, "num_batches": 2, "scale": 0.05, "sample_rate": 16000}


def tiny(folder, **more):
    return {"model": TINY_MODEL, "data": DATA, "warmup": 1, "measured": 3, "cpu_threads": 1, "devices": "cpu",
            "variants": ["ctc"], "scaling": ["strong"], "output_folder": str(folder), **more}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scaled")
    cfg = validate(tiny(folder, world_sizes=[1, 2]), "tiny.yaml", {"noprogressbar": True})
    outcome = run_config(get_job("train"), cfg, log=lambda line: None)
    return cfg, outcome, load_results(outcome.results)


def test_every_world_and_rank_is_one_ok_record(scaled):
    _, outcome, results = scaled
    assert outcome.failed == 0
    cells = sorted((m.cell.params["world_size"], m.cell.rank is None, m.cell.rank) for m in results.records)
    assert cells == [(1, False, 0), (1, True, None), (2, False, 0), (2, False, 1), (2, True, None)]
    for m in results.records:
        assert m.ok
        if m.cell.rank is None:  # the world: the command a user runs, on a YAML file it wrote
            assert f"--nproc_per_node={m.cell.params['world_size']} --max_restarts=0 -m sbprof train " in \
                m.settings["torchrun"]
        else:
            world = m.settings["distributed"]
            assert (world["rank"], world["world_size"], world["backend"]) == (m.cell.rank, m.cell.params["world_size"],
                                                                              "gloo")
            assert len(m.wall_s) == 3 and all(c > 0 for c in m.extra["rank"]["comm_s"])  # DDP's all-reduce


def test_each_rank_trains_its_share_of_the_global_batch(scaled):
    cfg, _, results = scaled
    whole = mock_batches(2, 4, 0.05, 16000, TINY_MODEL["vocab_size"], seed=cfg.preamble.seed)
    order = [1, 0, 1]  # steps 1-3 after one warm-up step, two batches cycled
    ranks = sorted((m for m in results.records if m.cell.params["world_size"] == 2 and m.cell.rank is not None),
                   key=lambda m: m.cell.rank)
    summed = [a + b for a, b in zip(*(m.extra["audio_s_per_step"] for m in ranks))]
    assert summed == pytest.approx([whole.audio_s[i] for i in order])
    assert all(m.extra["utterances_per_step"] == [2.0] * 3 and m.cell.batch_size == 2 for m in ranks)


def test_the_strong_scaling_table_holds_world_sizes_1_and_2(scaled):
    _, _, results = scaled
    summary = analyse(results)
    (table,) = summary.scaling
    assert table.scaling == "strong" and [r.world_size for r in table.rows] == [1, 2]
    one, two = table.rows
    assert one.speedup == 1.0 and not two.oversubscribed  # 2 ranks x 1 thread on 2 cores
    for size, row in ((1, one), (2, two)):  # from the raw records: utterances over the slowest rank's steps
        ranks = [m for m in results.records if m.cell.params["world_size"] == size and m.cell.rank is not None]
        slowest = [max(walls) for walls in zip(*(m.wall_s for m in ranks))]
        assert row.utterances_per_s == pytest.approx(4 * len(slowest) / sum(slowest))
    assert two.speedup == pytest.approx(two.utterances_per_s / one.utterances_per_s)
    # On a machine with one core, the world of 2 is oversubscribed, as the sweep flags threads above the cores.
    one_core = dataclasses.replace(results, machine={**results.machine, "cpu_count": 1})
    assert "| 2 / 1 oversubscribed" in render_train(analyse(one_core)).replace("  ", " ")


def test_a_later_merge_of_a_world_gives_the_reports_figures(scaled, capsys):
    cfg, _, results = scaled
    world = next(m for m in results.records if m.cell.rank is None and m.cell.params["world_size"] == 2)
    assert merge_cli([world.extra["run_folder"]], prog="sbprof merge") == 0
    merged = (Path(world.extra["run_folder"]) / "report.md").read_text()
    report = (Path(cfg.preamble.output_folder) / "report.md").read_text()
    for part in ("### Per rank", "### Per host"):  # the headline table, then the per-rank one, figure for figure
        table = merged.split(part)[0].rsplit("## ctc-strong/train", 1)[1].strip() if part == "### Per rank" else \
            merged.split("### Per rank")[1].split(part)[0].split("\n\n", 2)[2].strip()
        assert table in report


def test_running_the_study_again_resumes_without_launching(scaled):
    cfg, _, results = scaled
    again = run_config(get_job("train"), cfg, log=lambda line: None)
    assert again.measured == 0 and again.resumed == len(results.records)


def test_a_crowded_world_withholds_its_wall_time_verdicts_and_says_why(scaled):
    # Issue 39: on a crowded machine the communication rule fired at "38 % of the step", mostly waiting for a core.
    _, _, results = scaled
    summary = analyse(results)
    world = next(w for w in summary.worlds if w.world_size == 2)
    section = world.summary.sections[0]
    assert section.crowding is not None and section.crowding.measured and section.crowding.threads == 2
    rules = [v.rule for v in world.summary.limits.verdicts]
    if section.crowding.crowded:
        assert "communication" not in rules and "data loading" not in rules
        assert any("the machine was crowded" in u and "no communication" in u for u in summary.limits.undecided)
    else:  # a quiet machine: the rules decide on wall time, and the verdicts name the world
        assert all(v.sentence.startswith("World of 2") for v in summary.limits.verdicts)
