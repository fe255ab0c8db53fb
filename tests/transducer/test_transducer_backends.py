"""Every backend: registered, reported when missing, and agreeing with the reference where installed."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from sbprof.transducer.backends import all_backends, get_backend
from sbprof.transducer.backends.base import Backend
from sbprof.transducer.check import check_backend
from sbprof.transducer.backends.reference import rnnt_loss_reference
from transducer_workers import one_step_item, run_items

EXPECTED = {"reference", "torchaudio", "k2", "k2_pruned", "fast_rnnt", "optimized_transducer", "warprnnt_numba",
            "warp_transducer", "warp_rnnt", "speechbrain"}
IN_PROCESS = sorted(n for n, b in all_backends().items() if b.in_process and "cpu" in b.check_devices)


def test_registry_holds_every_backend_with_an_install_hint():
    assert set(all_backends()) == EXPECTED
    for backend in all_backends().values():
        assert backend.install_hint and backend.module and backend.devices


@pytest.mark.parametrize("name", IN_PROCESS)
def test_installed_backends_agree_with_the_reference(name):
    backend = get_backend(name)
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"{name} not installed here: {reason}")
    verdict = check_backend(backend, vocab_size=50)
    assert verdict["ok"], verdict
    assert verdict["max_loss_rel_diff"] <= 1e-5 and verdict["max_grad_abs_diff"] <= 1e-4


def _worker_check(python, name, log_path, env=None):
    """The worker's setup checks the backend; its one record carries the verdict."""
    loaded, results, crashes = run_items(python, name, [one_step_item(name)], log_path, env)
    assert not crashes, crashes
    return loaded[0], results[0]


@pytest.mark.slow
def test_speechbrain_agrees_under_the_cuda_simulator_in_its_own_process(tmp_path):
    pytest.importorskip("numba")
    pytest.importorskip("speechbrain")
    _, result = _worker_check(sys.executable, "speechbrain", tmp_path / "w.log", {"NUMBA_ENABLE_CUDASIM": "1"})
    assert result["status"] == "skipped" and "CUDA only" in result["message"], result  # checked, not timed on a CPU
    assert result["extra"]["agreement"]["ok"], result["extra"]["agreement"]


@pytest.mark.parametrize("name", ["k2", "k2_pruned"])
def test_k2_agrees_in_its_own_interpreter(name, tmp_path):
    """Set SBPROF_K2_PYTHON to a Python with k2 (e.g. the README's Python 3.9 + torch 1.13.1 venv)."""
    python = os.environ.get("SBPROF_K2_PYTHON")
    if not python or not os.access(python, os.X_OK):
        pytest.skip("SBPROF_K2_PYTHON does not name a Python with k2")
    loaded, result = _worker_check(python, name, tmp_path / "w.log")
    assert loaded["available"], loaded["reason"]
    assert result["status"] == "ok" and result["extra"]["agreement"]["ok"], result


class _Fake(Backend):
    name = "fake"
    module = "torch"

    def __init__(self, loss_fn):
        self.loss_fn = loss_fn

    def loss(self, logits, targets, logit_lengths, target_lengths, blank):
        return self.loss_fn(logits, targets, logit_lengths, target_lengths, blank)


@pytest.mark.parametrize("wrong, expected", [
    # SpeechBrain's raw convention: the loss divided by the frame count.
    (lambda lg, tg, tl, ul, b: rnnt_loss_reference(lg, tg, tl, ul, b) / tl, "loss differs"),
    (lambda lg, tg, tl, ul, b: rnnt_loss_reference(lg, tg, tl, ul, b + 1), "loss differs"),
    # Right values, but a gradient that ignores the per-utterance weights.
    (lambda lg, tg, tl, ul, b: rnnt_loss_reference(lg, tg, tl, ul, b).detach()
     + (rnnt_loss_reference(lg, tg, tl, ul, b).sum() - rnnt_loss_reference(lg, tg, tl, ul, b).sum().detach()) / len(tl),
     "gradient differs"),
    (lambda lg, tg, tl, ul, b: torch.zeros(len(tl) + 1, requires_grad=True), "returned shape"),
])
def test_check_flags_wrong_backends(wrong, expected):
    verdict = check_backend(_Fake(wrong), vocab_size=20)
    assert not verdict["ok"] and expected in verdict["message"]


def test_check_reports_a_backend_that_raises():
    def boom(*args):
        raise RuntimeError("kernel exploded\ndetails")

    verdict = check_backend(_Fake(boom), vocab_size=20)
    assert not verdict["ok"] and "RuntimeError: kernel exploded" in verdict["message"]


def test_missing_library_is_reported_with_its_reason():
    class Missing(Backend):
        name = "missing"
        module = "no_such_rnnt_library_xyz"

    ok, reason = Missing().available()
    assert not ok and "No module named 'no_such_rnnt_library_xyz'" in reason


def test_options_are_validated():
    assert get_backend("k2_pruned").configured({"s_range": 3}).s_range == 3
    assert get_backend("k2_pruned").s_range == 5  # the registry's instance is untouched
    with pytest.raises(ValueError, match="no option 'srange'"):
        get_backend("k2_pruned").configured({"srange": 3})
