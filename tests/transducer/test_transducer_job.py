"""The runner on the core's supervisor: other interpreters, not-installed rows, crashes, resuming, the command."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sbprof.analysis.transducer import analyse
from sbprof.cli import main as sbprof_main
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import Preamble, Repeats
from sbprof.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.results import FolderLock, load_results
from sbprof.report.transducer import render_markdown
from sbprof.transducer.backends import get_backend
from sbprof.transducer.backends.base import Backend
from sbprof.transducer.config import ShapeConfig, TransducerConfig
from sbprof.transducer.worker import Stepper
from transducer_workers import KILL_SWITCH, make_second_python

WARMUP, MEASURED = 2, 3


def main(argv):
    return sbprof_main(["transducer"] + list(argv))


def tiny_config(tmp_path, backends, retry_failed=False, **kw):
    preamble = Preamble(devices=("cpu",), cpu_threads=(1,), cuda_threads=1, seed=1234, warmup=WARMUP,
                        measured=MEASURED, repeats=Repeats(runs=1), output_folder=str(tmp_path / "out"),
                        progress_bar=False, retry_failed=retry_failed)
    settings = dict(shapes=ShapeConfig(source="synthetic", num_utterances=12, scale=16, seed=0), batch_size=3,
                    max_frames=None, vocab_size=40, joiner_dim=8)
    settings.update(kw)
    return TransducerConfig(preamble=preamble, backends=tuple(backends), **settings)


def run_benchmark(cfg, log=None):
    outcome = run_config(get_job("transducer"), cfg, log=log or (lambda line: None))
    return load_results(outcome.results)


@pytest.fixture(scope="module")
def second_python(tmp_path_factory):
    return make_second_python(tmp_path_factory.mktemp("venv") / "env")


def test_backend_runs_in_a_second_interpreter(tmp_path, second_python):
    cfg = tiny_config(tmp_path, ["reference"], interpreters={"reference": str(second_python)})
    (m,) = run_benchmark(cfg).records
    assert m.status == "ok", m.message
    assert (m.cell.model, m.cell.batch_size, m.cell.threads, m.cell.params) == ("reference", 3, 1, {"mode": "fixed"})
    assert m.extra["executable"] == str(second_python) != sys.executable
    assert m.settings["interpreter"] == str(second_python) and m.settings["vocab_size"] == 40
    assert len(m.wall_s) == MEASURED and m.warmup == WARMUP
    assert m.extra["agreement"]["ok"]
    assert m.memory.rss_method and m.memory.heap_trim == "malloc_trim" and m.memory.peak_rss_delta_bytes >= 0
    saved = load_results(cfg.preamble.output_folder)
    assert saved.job == "transducer" and saved.records == [m]
    assert saved.models["reference"]["interpreter"] == str(second_python)


def test_not_installed_in_the_other_interpreter_is_reported_not_dropped(tmp_path, second_python):
    cfg = tiny_config(tmp_path, ["k2", "warp_transducer"], interpreters={"k2": str(second_python)},
                      max_frames=100)
    if get_backend("warp_transducer").available()[0]:
        pytest.skip("warp_transducer is installed here")
    results = run_benchmark(cfg)
    assert sorted((m.label, m.cell.params["mode"], m.status) for m in results.records) == [
        ("k2", "fixed", "skipped"), ("k2", "max_frames", "skipped"),
        ("warp_transducer", "fixed", "skipped"), ("warp_transducer", "max_frames", "skipped")]
    assert all(m.extra["not_installed"] for m in results.records)
    assert "No module named 'k2'" in next(m.message for m in results.records if m.label == "k2")
    table = render_markdown(analyse(results))
    assert "pip install k2" in table and "warp-transducer repository" in table


def test_missing_interpreter_is_reported(tmp_path):
    cfg = tiny_config(tmp_path, ["k2"], interpreters={"k2": str(tmp_path / "nowhere" / "python")})
    (m,) = run_benchmark(cfg).records
    assert m.status == "skipped" and "not found" in m.message


@pytest.mark.slow
def test_a_worker_killed_in_a_step_leaves_an_error_row_and_the_check_stands(tmp_path, second_python, monkeypatch):
    monkeypatch.setenv(KILL_SWITCH, "1")  # the second interpreter's workers die in their first backward()
    cfg = tiny_config(tmp_path, ["reference"], interpreters={"reference": str(second_python)}, max_frames=100)
    records = run_benchmark(cfg).records
    assert [(m.cell.params["mode"], m.status) for m in records] == [("fixed", "error"), ("max_frames", "error")]
    for m in records:
        assert "worker process died (killed by signal SIGKILL) in this item" in m.message
        assert m.extra["agreement"]["ok"]  # the check (no backward()) ran before the kill


def test_a_finished_backend_is_kept_and_other_rules_are_refused(tmp_path):
    if get_backend("warp_rnnt").available()[0]:
        pytest.skip("warp_rnnt is installed here")
    cfg = tiny_config(tmp_path, ["warp_rnnt"])
    first = run_benchmark(cfg).records
    assert [(m.status, m.extra["not_installed"]) for m in first] == [("skipped", True)]
    lines = []
    assert run_benchmark(cfg, log=lines.append).records == first
    assert lines == [f"resuming: 1 record(s) already in {tmp_path / 'out' / 'results.json'}"]
    again = run_benchmark(tiny_config(tmp_path, ["warp_rnnt"], retry_failed=True)).records
    assert [m.status for m in again] == ["skipped"]  # tried again: still not installed
    with pytest.raises(ConfigError, match="vocab_size: 40 there, 30 now"):
        run_benchmark(tiny_config(tmp_path, ["warp_rnnt"], vocab_size=30))


def write_yaml(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("backends: [reference]\nshapes: {num_utterances: 8, scale: 16}\nbatching: {batch_size: 2}\n"
                    "vocab_size: 30\njoiner_dim: 8\nwarmup: 1\nmeasured: 2\ncpu_threads: 1\n"
                    f"output_folder: {tmp_path / 'out'}\n")
    return path


def test_command_measures_renders_resumes_and_refuses_a_busy_folder(tmp_path, capsys):
    path = write_yaml(tmp_path)
    assert main([str(path)]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| reference |" in report and "ok (" in report
    assert main([str(path)]) == 0
    assert "measured 0 cell(s) (0 failed), 1 already done" in capsys.readouterr().out
    assert (tmp_path / "out" / "report.md").read_text() == report
    assert main([str(path), "--joiner_dim", "9"]) == 2
    assert "joiner_dim: 8 there, 9 now" in capsys.readouterr().err
    with FolderLock(tmp_path / "out"):
        assert main([str(path)]) == 2
    assert "is in use by another sbprof run" in capsys.readouterr().err


def test_help_does_not_import_torch():
    probe = ("from sbprof.cli import main\nassert main(['transducer', '--help']) == 0\n"
             "import sys\nprint('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"})
    assert "CONFIG.yaml [--key value ...]" in done.stdout and done.stdout.strip().splitlines()[-1] == "False"


class _Sleeper(Backend):
    name = "sleeper"
    module = "time"

    def __init__(self, seconds):
        self.seconds = seconds
        self.slept = []  # each sleep's length by an outside clock: a busy machine wakes a sleeper late

    def train_loss(self, batch):
        t0 = time.perf_counter()
        time.sleep(self.seconds)
        self.slept.append(time.perf_counter() - t0)
        return batch.encoder_out.sum().reshape(1)


def test_step_time_matches_a_known_sleep():
    sleeper = _Sleeper(0.03)
    stepper = Stepper(sleeper, "cpu", vocab_size=10, joiner_dim=4, blank=0, seed=0)
    record = stepper.measure([[(5, 2)]] * 6, unmeasured=2, trace_path=None)
    assert len(record["wall_s"]) == 4 and len(sleeper.slept) == 6
    # Each measured step holds its sleep, as long as it lasted (load cannot break that), and little else (a
    # tiny joiner and loss): on a busy machine one step may wait for a core, so one of the four must show it.
    pairs = list(zip(sleeper.slept[2:], record["wall_s"]))
    assert all(0.03 <= s <= w for s, w in pairs), pairs
    assert min(w - s for s, w in pairs) < 0.015, pairs
    assert all(c < 0.01 for c in record["cpu_s"])  # sleeping costs no CPU time


def test_peak_memory_covers_the_lattice():
    shapes = [(60, 15)] * 4
    stepper = Stepper(get_backend("reference"), "cpu", vocab_size=500, joiner_dim=16, blank=0, seed=0)
    record = stepper.measure([shapes] * 2, unmeasured=1, trace_path=None)
    logits_bytes = 4 * 60 * 16 * 500 * 4  # float32 joiner output
    added = record["memory"]["peak_rss_delta_bytes"]
    # The reference holds the logits, their float64 log-softmax (2x) and gradients of both at once.
    assert 3 * logits_bytes <= added < 40 * logits_bytes, (added, logits_bytes)


def test_trace_export(tmp_path):
    stepper = Stepper(get_backend("reference"), "cpu", vocab_size=10, joiner_dim=4, blank=0, seed=0)
    record = stepper.measure([[(4, 2)]] * 2, unmeasured=1, trace_path=str(tmp_path / "t" / "x.pt.trace.json"))
    assert Path(record["trace"]).stat().st_size > 0
