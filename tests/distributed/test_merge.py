"""The merge of a run's rank files: missing and stopped ranks, runs never mixed, the command line, 512 ranks."""
import json
import re
import subprocess
import sys
import tracemalloc
import weakref

import pytest

import sbprof.distributed.merge as merge_module
from sbprof.cli.tools import main as cli
from sbprof.distributed.merge import find_run, merge_run
from sbprof.distributed.rankfile import RankWriter, rank_file, rank_files, read_rank_file
from sbprof.base.errors import ConfigError
from benchmarks.merge_ranks import write_run  # the benchmark's generator: the test merges what it times


def header(**changes):
    return {"run_id": "synthetic-3", "rank": 1, "local_rank": 1, "world_size": 3, "local_world_size": 3,
            "node_rank": 0, "host": "h", "backend": "gloo", **changes}


def partial_run(folder, ends):
    """A run of 3 ranks (from the generator), then rank files rewritten to end as ``ends`` says."""
    run = write_run(folder, 3, steps=5)
    for rank, end in ends.items():
        lines = rank_file(run, rank).read_text().splitlines(keepends=True)
        if end is None:  # died after step 2: its header and steps 0-2, no record, no end line
            rank_file(run, rank).write_text("".join(lines[:4]))
        elif end == "gone":
            rank_file(run, rank).unlink()
        else:
            lines[-1] = json.dumps({"end": {"reason": end, "last_step": 4}}) + "\n"
            rank_file(run, rank).write_text("".join(lines))
    return run


def test_a_complete_run_names_its_straggler_and_what_it_costs_the_others(tmp_path):
    summary = merge_run(write_run(tmp_path, 4, steps=20, straggler=2, straggler_s=0.05))
    (s,) = summary.sections
    assert summary.complete and s.slowest.rank == 2
    assert s.excess_s == pytest.approx(0.05 + 0.2 * 0.01, abs=0.004)  # the others work 0.196-0.2 s
    assert all(r.wait_s == pytest.approx(0.05, abs=0.006) for r in s.rows if r.rank != 2)
    assert s.throughput.utterances_per_s == pytest.approx(4 * 8 / s.throughput.step_s, rel=0.03)


def test_a_dead_rank_keeps_the_steps_it_wrote_and_a_stopped_rank_keeps_its_figures(tmp_path):
    summary = merge_run(partial_run(tmp_path, {1: None, 2: "SIGTERM"}))
    assert not summary.complete and summary.missing == []
    # Rank 1 died after its step lines 0-2 (no record, no end line): its steps are rebuilt from those lines
    assert [(r.rank, r.ended.split(":")[0], r.last_step) for r in summary.stopped_early] == [
        (1, "no end line", 2), (2, "SIGTERM", 4)]
    assert [r.rank for r in summary.sections[0].rows] == [0, 1, 2]


def test_a_rank_without_a_file_is_missing_never_seen(tmp_path):
    summary = merge_run(partial_run(tmp_path, {0: "gone"}))
    assert [(m.rank, m.last_step) for m in summary.missing] == [(0, None)]


def test_a_torn_last_line_is_ignored(tmp_path):
    run = write_run(tmp_path, 1, steps=3)
    path = rank_file(run, 0)
    text = path.read_text()
    path.write_text(text[:text.rindex('{"record"')] + '{"step": {"section": "train", "ind')
    rank = read_rank_file(path)
    assert rank.torn and rank.last_seen == 2 and rank.end is None


@pytest.mark.parametrize("case, message", [
    ("run_id", "belongs to another run (run_id"),
    ("world_size", "belongs to another run (world_size"),
    ("twice", "rank 0 appears twice"),
    ("outside", "rank 5 outside a world of size 3"),
])
def test_files_of_other_runs_or_world_sizes_are_never_mixed(tmp_path, case, message):
    run = write_run(tmp_path, 3, steps=2)
    path = run / "rank00009.jsonl"
    fields = {"run_id": {"run_id": "other"}, "world_size": {"world_size": 4}, "twice": {"rank": 0},
              "outside": {"rank": 5}}[case]
    RankWriter(path, header(**fields)).close()
    with pytest.raises(Exception, match=re.escape(message)):
        merge_run(run)


def test_a_folder_of_several_runs_is_refused_naming_them(tmp_path, monkeypatch):
    write_run(tmp_path, 2, steps=2)
    write_run(tmp_path, 3, steps=2)
    with pytest.raises(Exception, match="holds 2 runs .*synthetic-2 .*synthetic-3"):
        find_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SBPROF_RANK_FOLDER", str(tmp_path / "synthetic-2"))
    assert find_run() == tmp_path / "synthetic-2"  # no folder named: $SBPROF_RANK_FOLDER


def test_the_command_exits_1_on_an_incomplete_run_and_2_on_bad_input_writing_nothing(tmp_path, capsys):
    run = partial_run(tmp_path / "a", {1: None})
    assert cli([str(run)], prog="sbprof merge") == 1
    out, err = capsys.readouterr()
    assert "report.md: " in out and err.strip().startswith("sbprof: error: run synthetic-3 is incomplete: stopped early "
                                                        "rank 1 (no end line") and "\n" not in err.strip()
    assert "last step ended: 3, counting from 1" in err
    assert "**INCOMPLETE**" in (run / "report.md").read_text() and (run / "ranks.csv").is_file()
    write_run(tmp_path / "b", 2, steps=2)
    write_run(tmp_path / "b", 3, steps=2)
    assert cli([str(tmp_path / "b")], prog="sbprof merge") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err and "merging never mixes runs" in err
    assert not list((tmp_path / "b").rglob("report.md"))


def test_512_generated_rank_files_merge_with_memory_bounded_by_one_rank(tmp_path, monkeypatch):
    run = write_run(tmp_path, 512, steps=60, straggler=300)
    alive, most = [], [0]
    real = merge_module.read_rank_file

    def counted(path):
        rank = real(path)
        alive.append(weakref.ref(rank))  # reference counting frees a rank file as soon as nothing holds it
        most[0] = max(most[0], sum(ref() is not None for ref in alive))
        return rank

    monkeypatch.setattr(merge_module, "read_rank_file", counted)
    summary = merge_run(run)
    assert most[0] <= 2  # the rank being read and, at most, the one before it
    (s,) = summary.sections
    assert len(s.rows) == 512 and s.slowest.rank == 300 and len(s.hosts) == 64 and len(s.shown) == 16
    monkeypatch.setattr(merge_module, "read_rank_file", real)
    tracemalloc.start()
    one = read_rank_file(rank_files(run)[0])
    one_rank = tracemalloc.get_traced_memory()[1]
    del one
    tracemalloc.reset_peak()
    merge_run(run)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # A row per rank (a few KB) plus one rank's file, never every rank's samples
    assert peak < 512 * 4096 + 2 * one_rank, (peak, one_rank)


def test_a_rank_file_is_never_overwritten_and_foreign_files_are_refused(tmp_path):
    path = rank_file(tmp_path, 0)
    RankWriter(path, header(rank=0)).close()
    with pytest.raises(ConfigError, match="already exists: another process wrote rank 0 of run 'synthetic-3'"):
        RankWriter(path, header(rank=0))
    newer, foreign = tmp_path / "rank00001.jsonl", tmp_path / "rank00002.jsonl"
    newer.write_text('{"header": {"format": "sbprof-rank", "version": 99, "rank": 1}}\n')
    foreign.write_text('{"x": 1}\n')
    with pytest.raises(ConfigError, match="written by a newer sbprof"):
        read_rank_file(newer)
    with pytest.raises(ConfigError, match="not an sbprof rank file"):
        read_rank_file(foreign)


def test_merging_ranks_imports_no_torch(tmp_path):
    run = write_run(tmp_path, 2, steps=2)
    probe = (f"from sbprof.cli import main\nassert main(['merge', {str(run)!r}]) == 0\n"
             "import sys\nassert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
