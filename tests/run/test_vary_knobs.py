"""The knobs of ``sbprof run --vary`` set in this process: ``compile`` on a tiny plain loop (its top-level modules
compiled, the same outputs as eager, the patch undone) and on a real SpeechBrain ``Brain`` (its own run option)."""
from __future__ import annotations

import contextlib

import torch

from sbprof.script.knobs import apply


def test_compile_compiles_the_top_level_modules_of_a_plain_step_and_keeps_their_outputs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    loss_of = torch.nn.MSELoss()
    x, y = torch.randn(5, 4), torch.zeros(5, 1)
    eager = loss_of(model(x), y).item()
    call = torch.nn.Module.__call__
    with contextlib.ExitStack() as stack:
        apply({"compile": True}, stack)
        compiled = loss_of(model(x), y)
        compiled.backward()
        # the model and the loss module (called from the step) are compiled; the layers inside go with the model
        assert model._compiled_call_impl is not None and loss_of._compiled_call_impl is not None
        assert model[0]._compiled_call_impl is None
    assert torch.nn.Module.__call__ is call  # undone when the stack closes
    assert abs(compiled.item() - eager) <= 1e-6 * max(1.0, abs(eager))


def test_compile_is_a_brains_own_run_option():
    import speechbrain as sb

    with contextlib.ExitStack() as stack:
        apply({"compile": True, "precision": "bf16"}, stack)
        brain = sb.Brain(modules={"lin": torch.nn.Linear(2, 2)}, run_opts={"device": "cpu"})
    assert brain.compile is True and brain.precision == "bf16"
    brain._compile()  # what the Brain does at the start of fit: its modules wrapped by torch.compile
    assert isinstance(brain.modules.lin, torch._dynamo.eval_frame.OptimizedModule)
    assert sb.Brain(modules={"lin": torch.nn.Linear(2, 2)}, run_opts={"device": "cpu"}).compile is False
