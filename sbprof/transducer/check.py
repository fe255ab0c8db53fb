"""Correctness before speed: a backend's losses and gradients against the reference.

On a few small random batches (variable lengths inside a batch, a realistic
vocabulary), both the backend and :func:`~sbprof.transducer.backends.reference.rnnt_loss_reference`
compute per-utterance losses of the same float32 logits, and the gradients of
``sum_n w_n loss_n`` with random positive weights ``w_n`` (so a backend that
mixes up utterances, or ignores the incoming gradient, is caught). The
gradient is compared over the whole padded tensor: what a backend writes
into padding reaches the joiner's parameters in training.

Tolerances (:data:`TOLERANCES`), from what float32 can do on these sizes:
the losses (tens of nats) carry rounding of about 1e-7 relative (seen:
9e-8 at worst over torchaudio, k2, fast_rnnt, warprnnt_numba, SpeechBrain),
so 1e-5 relative leaves a factor 100. A gradient is ``exp`` of a log-domain
sum of about a hundred nats, so its rounding is about 1e-5 absolute (seen:
1.5e-5 at worst, warprnnt_numba; 1.3e-5 torchaudio), so 1e-4 leaves a factor
7; a real bug (a wrong blank, a missing ``log_softmax``, the T-normalised
loss) is off by 1e-2 or more. A backend outside them is flagged
``disagrees`` and is not ranked.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence, Tuple

import torch

from sbprof.transducer.backends.base import Backend
from sbprof.transducer.inputs import random_logits, random_targets
from sbprof.transducer.backends.reference import rnnt_loss_reference
from sbprof.workers.protocol import one_line

Shape = Tuple[int, int]

TOLERANCES: Dict[str, float] = {"loss_rtol": 1e-5, "grad_atol": 1e-4}
"""``|loss - ref| <= loss_rtol * max(1, |ref|)`` per utterance; ``|grad - ref_grad| <= grad_atol`` elementwise."""

CHECK_CASES: List[List[Shape]] = [
    [(6, 3), (4, 2), (3, 1)],
    [(9, 5), (9, 5)],
    [(12, 4), (5, 6), (7, 1), (2, 2)],
]
"""Small batches: padding in T and in U, a label longer than the frames, equal lengths."""


def check_backend(backend: Backend, vocab_size: int = 500, blank: int = 0, seed: int = 0,
                  device: str = "cpu", cases: Sequence[Sequence[Shape]] = tuple(CHECK_CASES),
                  tolerances: Dict[str, float] = TOLERANCES) -> Dict[str, Any]:
    """Compare ``backend`` with the reference; returns a JSON-able verdict.

    Returns
    -------
    dict
        ``ok`` (bool), ``max_loss_rel_diff``, ``max_grad_abs_diff``,
        ``tolerances``, ``cases``, ``message`` (why it failed, or "").

    Example
    -------
    >>> from sbprof.transducer.backends import get_backend
    >>> check_backend(get_backend("reference"), vocab_size=6)["ok"]
    True
    """
    generator = torch.Generator().manual_seed(seed)
    worst_loss = worst_grad = 0.0
    verdict: Dict[str, Any] = {"ok": True, "tolerances": dict(tolerances), "cases": len(cases), "message": ""}
    for shapes in cases:
        logits = random_logits(shapes, vocab_size, generator).to(device).requires_grad_()
        targets, logit_lengths, target_lengths = random_targets(shapes, vocab_size, blank, generator, device)
        weights = (torch.rand(len(shapes), generator=generator) + 0.5).to(device)
        expected = rnnt_loss_reference(logits, targets, logit_lengths, target_lengths, blank=blank)
        (expected_grad,) = torch.autograd.grad((weights * expected).sum(), logits)
        failed = dict(verdict, ok=False, max_loss_rel_diff=None, max_grad_abs_diff=None)
        try:
            got = backend.loss(logits, targets, logit_lengths, target_lengths, blank)
            if tuple(got.shape) != (len(shapes),):
                return dict(failed, message=f"returned shape {tuple(got.shape)}, expected ({len(shapes)},)")
            (got_grad,) = torch.autograd.grad((weights * got).sum(), logits)
        except Exception as exc:  # any failure of the library is the verdict, not a crash
            return dict(failed, message=f"raised on shapes {list(shapes)}: {one_line(exc)}")
        rel = ((got.detach().double() - expected.detach().double()).abs()
               / expected.detach().double().abs().clamp(min=1.0)).max().item()
        grad = (got_grad.double() - expected_grad.double()).abs().max().item()
        worst_loss = max(worst_loss, rel if math.isfinite(rel) else math.inf)
        worst_grad = max(worst_grad, grad if math.isfinite(grad) else math.inf)
    verdict.update(max_loss_rel_diff=worst_loss, max_grad_abs_diff=worst_grad)
    problems = []
    if not worst_loss <= tolerances["loss_rtol"]:
        problems.append(f"loss differs by {worst_loss:.2e} (relative) > {tolerances['loss_rtol']:.0e}")
    if not worst_grad <= tolerances["grad_atol"]:
        problems.append(f"gradient differs by {worst_grad:.2e} > {tolerances['grad_atol']:.0e}")
    if problems:
        verdict.update(ok=False, message="; ".join(problems))
    return verdict
