"""Results folders of several machines side by side: labelled, never pooled, environments listed."""
from __future__ import annotations

import pytest

from helpers.compare_fakes import record, results_of
from sbprof.analysis.machine_facts import machine_facts
from sbprof.analysis.machines import analyse_machines
from sbprof.base.errors import ConfigError
from sbprof.record import Cell, Measurement
from sbprof.report import machines as report
from sbprof.report.format import machine_line
from sbprof.results.merge import load_machines
from sbprof.results.store import Results, ResultStore


def render_merged(machines):
    return report.render_merged(analyse_machines(machines))


def render_files(machines):
    return report.render(analyse_machines(machines))

GPU_BOX = {"hostname": "gpu-box", "cpu": "Xeon", "cpu_count": 16, "gpu": "H100", "cuda": "13.0", "torch": "2.14.1",
           "speechbrain": "1.1.2", "python": "3.11.7"}
LAPTOP = {"hostname": "laptop", "cpu": "EPYC", "cpu_count": 2, "gpu": None, "torch": "2.14.1",
          "speechbrain": "1.1.2", "python": "3.11.7"}


def save(folder, results):
    folder.mkdir()
    ResultStore(folder, results).add_many(results.records)
    return folder


def compare_folders(tmp_path):
    a = save(tmp_path / "a", results_of([record("v", x, 0, [0.010 * x]) for x in (1.0, 2.0, 4.0)], machine=GPU_BOX,
                                        models=["v"]))
    b = save(tmp_path / "b", results_of([record("v", x, 0, [0.020 * x]) for x in (1.0, 2.0, 4.0)], machine=LAPTOP,
                                        models=["v"]))
    return a, b


def test_machines_are_labelled_by_host_and_keep_their_own_records(tmp_path):
    a, b = compare_folders(tmp_path)
    machines = load_machines([a, b])
    assert [m.label for m in machines] == ["gpu-box", "laptop"]
    assert [len(m.results.records) for m in machines] == [3, 3]
    assert "Xeon (16 logical cores); H100 (CUDA 13.0)" in machine_line(machine_facts(machines[0].results.machine))
    assert "no GPU" in machine_line(machine_facts(machines[1].results.machine))


def test_merged_report_puts_machines_in_columns_with_each_machines_own_figures(tmp_path):
    a, b = compare_folders(tmp_path)
    text = render_merged(load_machines([a, b]))
    assert "| variant   | seconds of audio per utterance   | gpu-box" in text
    row = next(line for line in text.splitlines() if line.startswith("| v ") and "| 2 s " in line)
    # 20 ms on one machine and 40 ms on the other: never their pooled 30 ms.
    assert "20.0 [20.0, 20.0]" in row and "40.0 [40.0, 40.0]" in row and "30.0" not in row
    assert "## Machines" in text and "Xeon" in text and "EPYC" in text


def test_each_machines_cpu_cost_is_its_own_cpu_time_over_audio_seconds(tmp_path):
    def runs(machine, cpu_per_audio_s, folder):
        records = []
        for x in (1.0, 2.0):
            for run, jitter in enumerate((0.9, 1.1)):
                m = record("v", x, run, [0.050 * x])  # the same wall time on both machines: waiting, not work
                m.cpu_s = [cpu_per_audio_s * jitter * x]
                records.append(m)
        return save(tmp_path / folder, results_of(records, machine=machine, models=["v"]))

    text = render_merged(load_machines([runs(GPU_BOX, 0.010, "a"), runs(LAPTOP, 0.030, "b")]))
    assert "## CPU cost per point (core-seconds per audio second), machines as columns" in text
    row = next(line for line in text.splitlines() if line.startswith("| v ") and "| 2 s " in line and "[" in line
               and "0.0100" in line)
    # Each machine's median over its two runs (0.9x and 1.1x of its own cost), never the other machine's.
    assert row.split("|")[3].strip().startswith("0.0100 [") and row.split("|")[4].strip().startswith("0.0300 [")


def test_merged_report_and_plot_are_rendered(tmp_path):
    a, b = compare_folders(tmp_path)
    outputs = render_files(load_machines([a, b]))
    assert set(outputs) == {"report.md", "plots/machines-latency.png"}
    assert outputs["report.md"].count("plots/machines-latency.png") == 1
    assert len(outputs["plots/machines-latency.png"]) > 10_000


def test_sweeps_merge_with_machine_and_setting_columns(tmp_path):
    def sweep(machine, rtf, device, threads):
        cells = [Measurement(label="c", cell=Cell(model="encoder_asr", device=device, threads=threads, audio_s=a,
                                                  batch_size=b), wall_s=[rtf * a * b], cpu_s=[0.1],
                             audio_seconds=a * b) for a in (1.0, 2.0) for b in (1, 4)]
        return Results("profile", machine=machine, records=cells)

    a = save(tmp_path / "a", sweep(GPU_BOX, 0.001, "cuda:0", 16))
    b = save(tmp_path / "b", sweep(LAPTOP, 0.01, "cpu", 1))
    text = render_merged(load_machines([a, b]))
    assert "| audio x batch   | gpu-box: cuda:0, 16 threads   | laptop: cpu, 1 thread   |" in text
    assert "| 2 s x 4         | 0.00100 [0.00100, 0.00100]    | 0.0100 [0.0100, 0.0100] |" in text
    # CPU cost: 0.1 s of CPU per batch over its audio seconds, on the CPU machine only (the GPU box is on CUDA)
    costs = text[text.index("## encoder_asr: CPU cost"):]
    assert "| 2 s x 4         | n/a                           | 0.0125                  |" in costs
    assert "| 1 s x 1         | n/a                           | 0.100                   |" in costs


def test_one_host_twice_is_told_apart_by_folder(tmp_path):
    a = save(tmp_path / "monday", results_of([record("v", 1.0, 0, [0.1])], machine=LAPTOP))
    b = save(tmp_path / "tuesday", results_of([record("v", 1.0, 0, [0.2])], machine=LAPTOP))
    assert [m.label for m in load_machines([a, b])] == ["laptop (monday)", "laptop (tuesday)"]


@pytest.mark.parametrize("case, message", [
    ("one", "at least two results folders"),
    ("twice", "results given twice"),
    ("kinds", "cannot merge different kinds of results (compare-models, profile)"),
    ("missing", "no such results file"),
    ("train", "holds results of 'sbprof train'; merge puts results of profile or compare-models side by side"),
])
def test_bad_merges_are_refused_with_one_line(tmp_path, case, message):
    a, b = compare_folders(tmp_path)
    sweep = save(tmp_path / "s", Results("profile", machine=LAPTOP))
    train = save(tmp_path / "t", Results("train", machine=LAPTOP))
    train2 = save(tmp_path / "t2", Results("train", machine=GPU_BOX))
    folders = {"one": [a], "twice": [a, a / "results.json"], "kinds": [a, sweep], "missing": [a, tmp_path / "none"],
               "train": [train, train2]}
    with pytest.raises(ConfigError) as caught:
        load_machines(folders[case])
    assert message in str(caught.value) and "\n" not in str(caught.value)
