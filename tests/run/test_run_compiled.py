"""sbprof run on a model compiled in place (``nn.Module.compile``): its hooks run inside the compiled call, and must
stay out of Dynamo. Traced, sbprof's own state became guards (its step counter, the depth of module calls), and each
change of it recompiled the model: 8 recompiles, then Dynamo's limit and an eager model in the measured steps."""
from __future__ import annotations

import subprocess
import sys

from run_helpers import TINY, env, records


def test_a_compiled_model_is_not_recompiled_by_sbprofs_step_hooks(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "sbprof", "run", "--no-trace", "--output_folder", str(out),
                           str(TINY), "--linear", "32", "--steps", "20", "--compile"], cwd=tmp_path,
                          env={**env(), "TORCH_LOGS": "recompiles"}, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    # Dynamo's own log names every recompiled function and the guard that failed: none may be sbprof's step hooks.
    recompiled = [line for line in done.stderr.splitlines() if "Recompiling function" in line]
    assert not [line for line in recompiled if "/sbprof/script/" in line], recompiled
    assert "recompile_limit" not in done.stderr
    train = records(out)["train"]
    assert len(train["wall_s"]) == 5
    # Its FLOP step opens inside the compiled call, where the compiled backward runs unseen: no count, said why
    # (an 8-layer MLP read its forward alone, 34 % of its FLOPs), never a third of the truth as the figure.
    assert "flops" not in train["extra"] or not train["extra"]["flops"]
    assert "a compiled module's backward ran unseen by the FLOP counter" in train["extra"]["why"]["flops"]
