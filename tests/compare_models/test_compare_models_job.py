"""A comparison end to end: real workers, models of known cost and energy, a HyperPyYAML module, resume, meter log."""
from __future__ import annotations

import csv
import json
import time

import pytest

from helpers.compare_fakes import BUSY, fake_powercap, write_compare_yaml
from helpers.fake_interfaces import use_test_environment, write_model_folder
from sbprof.cli import main as sbprof_main
from sbprof.results import load_results

UJ_PER_CALL = 50_000
SAMPLES = 3


def main(argv, prog):
    return sbprof_main([prog.split()[-1]] + list(argv))


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def setup(tmp_path):
    busy = write_model_folder(tmp_path / "busy", rtf=0.01)
    zone = fake_powercap(tmp_path / "powercap", start_uj=900_000, max_uj=1_000_000)
    bump = write_model_folder(tmp_path / "bump", rtf=0.01, zone=str(zone), uj_per_call=UJ_PER_CALL,
                              max_uj=1_000_000)
    (tmp_path / "linear.yaml").write_text(
        "sample_rate: 16000\nmodel: !new:torch.nn.Linear\n    in_features: 40\n    out_features: 40\n")
    variants = [
        {"name": "fast", "source": str(busy), **BUSY},
        {"name": "slow", "source": str(busy), **BUSY, "overrides": {"rtf": 0.03}},
        {"name": "bump", "source": str(bump), **BUSY, "type": "helpers.compare_fakes.RaplBumpInterface"},
        {"name": "linear", "yaml": "linear.yaml", "module": "model", "input": "features", "features": 40},
    ]
    return write_compare_yaml(tmp_path / "c.yaml", variants, measured=SAMPLES,
                              energy={"powercap_root": str(tmp_path / "powercap")})


@pytest.mark.slow
def test_comparison_measures_known_costs_energy_and_parameters_then_resumes(tmp_path, capsys):
    path = setup(tmp_path)
    assert main([str(path), "--noprogressbar"], prog="sbprof compare-models") == 0
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {"results.json", "report.md", "results.csv", "plots", "logs"}
    results = load_results(out)
    assert results.job == "compare-models" and list(results.models) == ["fast", "slow", "bump", "linear"]
    records = {(m.cell.variant, m.cell.audio_s): m for m in results.records}
    assert len(records) == 8 and all(m.ok for m in records.values())
    for (variant, audio_s), m in records.items():
        assert len(m.wall_s) == SAMPLES and m.cell.run == 0 and m.warmup == 1
        if variant in ("fast", "slow"):
            target = {"fast": 0.01, "slow": 0.03}[variant] * audio_s  # BusyInterface spins rtf x seconds
            # Never under the spin in wall time; no more than it in CPU time (a busy machine stretches only the former).
            assert target <= min(m.wall_s) and m.summary("cpu_s").median < 1.25 * target + 0.002, (variant, m.cpu_s)
    # Energy: the bump model adds 50 mJ per call to the fake counter (wrapping it); the others add nothing.
    bump = records[("bump", 1.0)].energy
    assert bump.calls == SAMPLES + 1 and bump.per_call() == {"cpu:package-0": pytest.approx(0.05, abs=1e-12)}
    assert records[("fast", 1.0)].energy.joules == {"cpu:package-0": 0.0}
    # The module: 40 x 40 weights + 40 biases; fed 100 frames of 10 ms for 1 s.
    linear = records[("linear", 1.0)]
    assert linear.counts.params == 1640 and linear.audio_seconds == pytest.approx(1.0)
    assert linear.cell.input == "random-features:seed=0"
    report = (out / "report.md").read_text()
    assert "| linear    | `linear.yaml:model`" in report and "| 1.64 K" not in report
    assert "cpu:package-0 0.05 J" in report
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sorted({r["variant"] for r in rows}) == ["bump", "fast", "linear", "slow"]

    capsys.readouterr()
    assert main([str(path), "--noprogressbar"], prog="sbprof compare-models") == 0
    assert "measured 0 point(s) (0 failed), 8 already done" in capsys.readouterr().out
    assert main([str(path), "--noprogressbar", "--measured", "4"], prog="sbprof compare-models") == 2
    assert "measured: 3 there, 4 now" in capsys.readouterr().err

    # A wall-plug meter's log (50 W throughout) attached afterwards: nothing measured again.
    now = time.time()
    (tmp_path / "power.csv").write_text("timestamp,watts\n" + "".join(f"{now - 600 + 10 * i},50\n" for i in range(70)))
    assert main([str(path), "--noprogressbar", "--energy", json.dumps({
        "powercap_root": str(tmp_path / "powercap"), "meter_log": "power.csv"})], prog="sbprof compare-models") == 0
    for m in load_results(out).records:
        window = m.energy.end_unix_s - m.energy.start_unix_s  # the meter is read on the wall clock
        assert m.energy.joules["meter"] == pytest.approx(50 * window, rel=1e-9)
        assert window == pytest.approx(m.energy.duration_s, abs=0.01)
