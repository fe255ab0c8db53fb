"""The ``sbprof_budget`` fixture in a real pytest run: records a baseline, passes unchanged code, fails a slowdown."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder
from sbprof.compare_models.budget import check_budget
from sbprof.base.errors import ConfigError

BUSY = {"type": "helpers.fake_interfaces.BusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}
OPTIONS = {"audio_s": 0.5, "runs": 4, "samples": 5, "warmup": 1, "threshold": 0.10, "statistic": "p10"}
INNER_TEST = f'''
import os

def check(sbprof_budget, rtf):
    sbprof_budget.check("busy", source=os.environ["BUSY_FOLDER"], overrides={{"rtf": rtf}}, **{BUSY}, **{OPTIONS})

def test_unchanged_model_passes(sbprof_budget):
    check(sbprof_budget, 0.02)

def test_slowed_model_fails(sbprof_budget):
    check(sbprof_budget, 0.03)  # 50% slower than the baseline, threshold 10%
'''


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def plugin_installed() -> bool:
    return any(ep.value == "sbprof.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))


@pytest.mark.slow
def test_fixture_passes_unchanged_code_and_fails_an_injected_slowdown(tmp_path):
    # The slowdown is work (a CPU spin), as a real model's is: on a busy machine the fixture judges CPU time, and a
    # wall-clock spin's CPU time is only the share of a core the machine left it (seen passing 1.5x under load).
    folder = write_model_folder(tmp_path / "busy", rtf=0.02, clock="cpu")
    recorded = check_budget("busy", {"source": str(folder), **BUSY}, tmp_path / "baselines", **OPTIONS)
    assert recorded.status == "recorded" and (tmp_path / "baselines" / "busy" / "results.json").is_file()
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    # Loaded by -p unless the installed entry point already loads it (registering it twice is an error).
    plugin = [] if plugin_installed() else ["-p", "sbprof.pytest_plugin"]
    inner = subprocess.run([sys.executable, "-m", "pytest", "test_inner.py", "-q", "-p", "no:cacheprovider", *plugin,
                            "--rootdir", str(tmp_path), "--sbprof-baselines", str(tmp_path / "baselines")],
                           capture_output=True, text=True, env={**os.environ, "BUSY_FOLDER": str(folder)},
                           cwd=tmp_path, timeout=600)
    assert inner.returncode == 1 and "1 failed, 1 passed" in inner.stdout, inner.stdout + inner.stderr
    failure = " ".join(inner.stdout[inner.stdout.index("test_slowed_model_fails"):].split())
    # 0.03 / 0.02 = 1.5 by construction; the call's own overhead pulls the measured ratio a little below it
    assert "budget 'busy' (rtf, threshold 10%)" in failure
    assert re.search(r"regressed, new/baseline 1\.[3-5]", failure), failure
    assert "each run's p10" in failure


@pytest.mark.parametrize("status, outcome", [("recorded", pytest.skip.Exception), ("failed", pytest.fail.Exception)])
def test_fixture_skips_when_it_records_and_fails_when_the_budget_is_exceeded(monkeypatch, tmp_path, status, outcome):
    from sbprof.compare_models import budget
    from sbprof.pytest_plugin import Budget

    seen = {}

    def fake_check(name, variant, baseline_dir, **options):
        seen.update(name=name, variant=variant, baseline_dir=baseline_dir, **options)
        return budget.BudgetResult(name, status, f"budget {name!r}: {status}", baseline_dir / name)

    monkeypatch.setattr(budget, "check_budget", fake_check)
    with pytest.raises(outcome, match=f"budget 'm': {status}"):
        Budget(tmp_path, update=False).check("m", source="encoder_asr", type="EncoderASR", runs=6)
    assert seen == {"name": "m", "variant": {"source": "encoder_asr", "type": "EncoderASR"},
                    "baseline_dir": tmp_path, "update": False, "runs": 6}


def test_budget_refuses_too_few_runs_and_bad_names(tmp_path):
    with pytest.raises(ConfigError, match="runs=3; a verdict at 95% needs at least 4 fresh-process runs"):
        check_budget("b", {"source": "encoder_asr", "type": "EncoderASR"}, tmp_path, runs=3)
    with pytest.raises(ConfigError, match="becomes a file name: it must not hold '/'"):
        check_budget("a/b", {"source": "encoder_asr", "type": "EncoderASR"}, tmp_path)
