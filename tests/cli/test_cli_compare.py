"""``sbprof compare-models``, ``merge`` and ``compare``: one-line errors, the gate's exit codes, no torch to render."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.refusals import assert_refused
from sbprof.cli import main as sbprof_main
from sbprof.record import Cell, Measurement
from sbprof.results.store import Results, ResultStore

GOOD = """variants:
    - name: a
      source: encoder_asr
      type: EncoderASR
    - name: b
      source: encoder_decoder_asr
      type: EncoderDecoderASR
      overrides: {beam_size: 1}
vary: audio_s
values: [1, 2]
measured: 3
"""


def main(argv, prog):
    return sbprof_main([prog.split()[-1]] + list(argv))

BAD_INPUTS = [
    (("measured: 3", "mesured: 3"), "unknown key 'mesured' (did you mean 'measured'?)"),
    (("vary: audio_s", "vary: seconds"), "vary must be one of audio_s, frames, batch_size, got 'seconds'"),
    (("vary: audio_s", "vary: batch_size"), "values must hold only positive integers, got 1.5"),
    (("values: [1, 2]", "values: [0, 2]"), "values must hold only positive numbers, got 0"),
    (("name: b", "name: a"), "name(s) ['a'] used twice"),
    (("type: EncoderASR", "type: EncoderASRR"), "no class 'EncoderASRR' in speechbrain.inference"),
    (("type: EncoderASR", "type: VAD"), "type 'VAD' does not fit local model 'encoder_asr'"),
    (("source: encoder_asr", "source: encoder_asx"), "is not a local model"),
    (("      type: EncoderASR", "      type: EncoderASR\n      yaml: m.yaml"), "give either source/type"),
    (("      source: encoder_asr\n      type: EncoderASR", "      yaml: none.yaml\n      module: m"),
     "variants[0].yaml: no such file"),
    (("overrides: {beam_size: 1}", "overrides: [1]"), "variants[1].overrides must be a mapping"),
    # Before: caught only when the worker loaded the model (exit 1, an error record written)
    (("overrides: {beam_size: 1}", "overrides: {beam_szie: 1}"), "variants[1].overrides: 'beam_szie' is not a "
                                                                 "hyperparameter of "),
    (("measured: 3", "measured: 3\ndevices: gpu"), "devices: 'gpu' is not a device"),
    (("measured: 3", "measured: 3\nenergy: {cpu: yes_please}"), "energy.cpu must be True or False"),
    (("measured: 3", "measured: 3\nenergy: {meter_log: power.csv}"), "power.csv: no such power log"),
    (["--mesured", "3"], "unknown option --mesured (did you mean 'measured'?)"),
]


@pytest.mark.parametrize("change, expected", BAD_INPUTS)
def test_bad_input_stops_before_measuring_with_one_line(tmp_path, capsys, change, expected):
    path = tmp_path / "c.yaml"
    text = GOOD.replace("values: [1, 2]", "values: [1.5, 2]") if "batch_size" in str(change) else GOOD
    argv = [str(path), "--output_folder", str(tmp_path / "out")]
    if isinstance(change, tuple):
        assert change[0] in text
        text = text.replace(change[0], change[1], 1)
    else:
        argv += change
    path.write_text(text)
    assert_refused(main(argv, prog="sbprof compare-models"), capsys, expected, nothing_in=tmp_path / "out")


def save(folder: Path, levels, cpu="CPU", variant="v") -> Path:
    folder.mkdir(parents=True)
    records = [Measurement(label="p", cell=Cell(model="m", variant=variant, audio_s=1.0, batch_size=1, run=r),
                           wall_s=[0.1 * lv, 0.1 * lv * 1.01], cpu_s=[0.1, 0.1], audio_seconds=1.0)
               for r, lv in enumerate(levels)]
    results = Results("compare-models", rules={"vary": "audio_s"},
                      machine={"cpu": cpu, "cpu_count": 2}, records=records)
    ResultStore(folder, results).add_many(records)
    return folder


LEVELS = [0.93, 0.97, 1.0, 1.02, 1.05, 1.08]


@pytest.mark.parametrize("scale, runs, extra, code, says", [
    (1.0, 6, [], 0, "1 unchanged"),
    (1.4, 6, [], 1, "1 regressed"),
    (0.6, 6, [], 0, "1 improved"),
    (1.4, 6, ["--threshold", "50%"], 0, "within the 50% threshold"),
    (1.4, 2, [], 2, "1 cell(s) not judged"),
    (1.4, 2, ["--within-run"], 1, "WITHIN-RUN"),
    (1.4, 6, ["--statistic", "p10"], 1, "each run's p10"),
])
def test_gate_exit_codes(tmp_path, capsys, scale, runs, extra, code, says):
    base = save(tmp_path / "base", LEVELS[:runs])
    new = save(tmp_path / "new", [scale * lv for lv in LEVELS[:runs][::-1]])
    assert sbprof_main(["gate", str(base), str(new)] + extra) == code
    printed = capsys.readouterr()
    assert says in printed.out
    # "compare", the gate's former name, is the same command and says nothing more
    assert sbprof_main(["compare", str(base), str(new)] + extra) == code
    assert capsys.readouterr() == printed


def test_help_lists_compare_as_an_alias_of_gate(capsys):
    assert sbprof_main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert "  gate " in listed and "  compare          alias of gate" in listed


@pytest.mark.parametrize("argv, expected", [
    (["--threshold", "5"], "--threshold 5: give a percentage (5%) or a fraction (0.05)"),
    # Before, argparse took "-5%" for an option: "expected one argument"
    (["--threshold", "-5%"], "--threshold -5%: the smallest increase that counts is never negative"),
    (["--confidence", "-0.9"], "confidence must be in [0.5, 1), got -0.9"),
    (["--metric", "speed"], "metric must be one of rtf, peak_memory"),
    (["--confidence", "1.5"], "confidence must be in [0.5, 1), got 1.5"),
    (["--cpu", "Other"], "different hardware"),
    (["--statistic", "p0"], "statistic 'p0' is not one of median, min, or pNN"),
])
def test_gate_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, expected):
    base = save(tmp_path / "base", LEVELS)
    new = save(tmp_path / "new", LEVELS, cpu="Other") if argv[0] == "--cpu" else base
    argv = [] if argv[0] == "--cpu" else argv
    assert_refused(main([str(base), str(new)] + argv, prog="sbprof gate"), capsys, expected)


def test_merge_writes_one_report_and_refuses_a_single_folder(tmp_path, capsys):
    a, b = save(tmp_path / "a", LEVELS), save(tmp_path / "b", LEVELS, cpu="Other")
    assert sbprof_main(["merge", str(a), str(b), "--output", str(tmp_path / "m")]) == 0
    assert "report.md: " in capsys.readouterr().out and (tmp_path / "m" / "report.md").is_file()
    assert main([str(a), "--output", str(tmp_path / "m2")], prog="sbprof merge") == 2
    assert "at least two results folders" in capsys.readouterr().err


def _imported_after(code: str) -> set:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_gate_and_render_only_do_not_import_torch(tmp_path):
    a, b = save(tmp_path / "a", LEVELS), save(tmp_path / "b", LEVELS)
    gate = f"from sbprof.cli import main\nassert main(['compare', {str(a)!r}, {str(b)!r}]) == 0"
    render = f"from sbprof.cli import main\nassert main(['compare-models', '--render-only', {str(a)!r}]) == 0"
    assert "torch" not in _imported_after(gate)
    assert "torch" not in _imported_after(render)
    assert (a / "report.md").is_file() and (a / "plots" / "latency.png").is_file()
