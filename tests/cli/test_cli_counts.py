"""``sbprof flops / params / modules``: analytic counts of a YAML module, errors by kind of mistake."""
import json

import pytest

from sbprof.cli import main
from sbprof.report.format import sig3

MODEL_YAML = """
model: !new:torch.nn.Sequential
    - !new:torch.nn.Linear
        in_features: 16
        out_features: 32
    - !new:torch.nn.ReLU
other: !new:torch.nn.Linear
    in_features: 2
    out_features: 2
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(MODEL_YAML)
    return path


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def result_in(folder):
    """The count's result, as the record in the folder's results.json keeps it."""
    (record,) = json.loads((folder / "results.json").read_text())["records"]
    return record["extra"]["result"]


def test_params_of_a_yaml_module(model_file, tmp_path, capsys):
    out = tmp_path / "p"
    code, printed, _ = run(["params", str(model_file), "--output_folder", str(out)], capsys)
    assert code == 0 and "544 parameters (544 trainable, 0 frozen)" in printed  # 16 x 32 + 32
    assert result_in(out)["total"] == 16 * 32 + 32
    code, printed, _ = run(["params", str(model_file), "--key", "other", "--output_folder", str(tmp_path / "o")],
                           capsys)
    assert code == 0 and "6 parameters" in printed


def test_flops_forward_and_backward_against_the_formula(model_file, tmp_path, capsys):
    out = tmp_path / "f"
    code, printed, _ = run(["flops", str(model_file), "--input", "[4, 16]", "--backward", "--output_folder", str(out)],
                           capsys)
    result = result_in(out)
    macs = 4 * 16 * 32
    assert code == 0 and result["macs"] == macs
    assert result["flops"] == 2 * macs + 4 * 32 + 4 * 32  # product, bias, relu
    assert result["backward_macs"] == macs  # weight gradient only: the input needs none
    assert "| 0 " in printed and "aten.addmm" in printed


def test_modules_times_the_selected_modules(model_file, tmp_path, capsys):
    out = tmp_path / "m"
    code, printed, _ = run(["modules", str(model_file), "--input", "[4, 16]", "--backward", "--select", "0", "1",
                            "--steps", "2", "--memory", "--output_folder", str(out)], capsys)
    result = result_in(out)
    assert code == 0 and result["steps"] == 2 and [r["label"] for r in result["rows"]][:2] == ["0", "1"]
    assert result["rows"][0]["memory"]["params_bytes"] == 4 * (16 * 32 + 32)
    assert "Host clock" in printed
    # Random tensors carry no audio: CPU time is shown, its cost per audio second is not.
    assert result["audio_s"] is None and all(r["cpu_total_ms"] >= 0 for r in result["rows"])
    assert "| CPU ms " in printed and "n/a (no audio)" in printed


@pytest.mark.parametrize("argv, code, message", [
    (["flops", "nosuch_model"], 2, "is not a local model"),
    (["flops", "{model}"], 2, "give its input shapes with --input"),
    (["flops", "{model}", "--input", "[4, 15]"], 2, "(random tensors of shapes [[4, 15]]): Sequential failed on"),
    (["modules", "{model}", "--input", "[4, 15]"], 2, "does not run on its input (random tensors of shapes [[4, 15]])"),
    (["flops", "{model}", "--input", "four"], 2, "--input 'four' must be a shape"),
    (["modules", "{model}", "--input", "[4, 16]", "--select", "2.*"], 2, "pattern '2.*' matches no module"),
    (["params", "{model}", "--key", "model.5"], 2, "module 'model.5': no entry '5'"),
    (["params", "{broken}"], 1, "cannot be built: TypeError"),
])
def test_errors_are_one_line(model_file, tmp_path, capsys, argv, code, message):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: !new:torch.nn.Linear\n    in_features: 2\n    out_feature: 2\n")
    argv = [a.format(model=model_file, broken=broken) for a in argv]
    got, _, err = run(argv + ["--output_folder", str(tmp_path / "x")], capsys)
    assert got == code and message in err and err.count("\n") == 1
    assert code != 2 or not (tmp_path / "x").exists()  # bad input leaves nothing behind


@pytest.mark.slow
def test_a_local_model_through_its_interface(tmp_path, capsys):
    out = tmp_path / "f"
    code, printed, _ = run(["flops", "encoder_asr", "--audio_s", "1", "--output_folder", str(out)], capsys)
    result = result_in(out)
    assert code == 0 and result["audio_s"] == pytest.approx(1.0) and result["flops"] > 0
    assert "per second of audio" in printed and "transcribe_batch" in printed
    from sbprof.models.build import build_local_model

    folder = build_local_model("encoder_asr")
    code, printed, _ = run(["params", str(folder), "--type", "EncoderASR", "--output_folder", str(tmp_path / "p")],
                           capsys)
    assert code == 0 and result_in(tmp_path / "p")["total"] == 3_174_480


@pytest.mark.slow
def test_modules_cpu_cost_is_cpu_time_over_the_audio_of_each_call(tmp_path, capsys):
    """Through an interface each call holds ``--batch_size`` x ``--audio_s`` seconds: the CPU cost of a row is
    its CPU ms per call / 1000 / those seconds."""
    from sbprof.analysis.counts import analyse
    from sbprof.results.store import load_results

    out = tmp_path / "m"
    code, printed, _ = run(["modules", "encoder_asr", "--audio_s", "1.5", "--batch_size", "2", "--steps", "2",
                            "--output_folder", str(out)], capsys)
    result = result_in(out)
    assert code == 0 and result["audio_s"] == pytest.approx(3.0)
    summary = analyse(load_results(out / "results.json"))
    rows = [r for r in result["rows"] if r["cpu_total_ms"] is not None]
    assert rows and summary.steps.audio_s_per_step == pytest.approx(3.0)
    for row in rows:
        assert summary.steps.cpu_cost[row["label"]] == pytest.approx(row["cpu_total_ms"] / 1e3 / 3.0)
    step_cpu = sum(result["cpu_step_ms_samples"]) / 2
    assert f"CPU per step {sig3(step_cpu)} ms, CPU cost {sig3(step_cpu / 1e3 / 3.0)} core-seconds" in printed


def test_a_count_runs_from_python_with_its_options_as_a_mapping(model_file, tmp_path, capsys):
    """``sbprof.run("flops", {...})`` is ``sbprof flops TARGET ...``: the same record."""
    import sbprof

    outcome = sbprof.run("flops", {"target": str(model_file), "input": "[4, 16]", "output_folder": str(tmp_path / "py")},
                         log=lambda line: None)
    assert outcome.measured == 1 and not outcome.all_failed
    assert run(["flops", str(model_file), "--input", "[4, 16]", "--output_folder", str(tmp_path / "cli")],
               capsys)[0] == 0
    by_python, by_cli = result_in(tmp_path / "py"), result_in(tmp_path / "cli")
    assert by_python["macs"] == by_cli["macs"] == 4 * 16 * 32  # batch x in x out products
    with pytest.raises(sbprof.ConfigError, match="unknown option 'inputs'.*did you mean 'input'"):
        sbprof.run("flops", {"target": str(model_file), "inputs": "[4, 16]"})
    with pytest.raises(sbprof.ConfigError, match="option depth takes a int"):
        sbprof.run("params", {"target": str(model_file), "depth": "2"})


@pytest.mark.parametrize("command, shapes", [("flops", ["--input", "[4, 16]"]), ("params", []),
                                             ("modules", ["--input", "[4, 16]", "--steps", "1"])])
def test_json_prints_only_json_on_standard_output(model_file, tmp_path, capsys, command, shapes):
    """Before, the closing status lines followed the JSON on standard output, so it did not parse; they go to
    standard error, a second run's "resuming" line too."""
    out = tmp_path / "j"
    for _ in range(2):
        code, printed, status = run([command, str(model_file), *shapes, "--json", "--output_folder", str(out)], capsys)
        assert code == 0, status
        data = json.loads(printed)  # the whole of standard output
        assert data["command"] == command and data["result"] == result_in(out)
        assert f"results: {out / 'results.json'}" in status
    assert "resuming: 1 record(s) already in" in status


@pytest.mark.parametrize("argv, message", [
    (["flops", "M", "--input", "[2147483648, 16]"], "--input '[2147483648, 16]': a size must be at most 2,147,483,647"),
    (["modules", "M", "--input", "[4, 16]", "--steps", "2147483648"], "--steps must be at most 2,147,483,647"),
    (["params", "M", "--depth", "99999999999999"], "--depth must be at most 2,147,483,647"),
    (["flops", "M", "--input", "[4, 16]", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
])
def test_sizes_past_the_jobs_bound_are_refused_before_the_worker(model_file, tmp_path, capsys, argv, message):
    """Like the jobs' sizes, at most 2^31-1: before, torch took [2147483648, 16] and the worker failed."""
    from helpers.refusals import assert_refused

    argv = [str(model_file) if a == "M" else a for a in argv]
    assert_refused(main([*argv, "--output_folder", str(tmp_path / "o")]), capsys, message, nothing_in=tmp_path / "o")
