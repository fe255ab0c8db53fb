"""CUDA ground truth of ``sbprof run``: the tests' SpeechBrain recipe (tests/run/recipes/brain) on cuda:0, unedited;
each measured step against the CUDA events the recipe's Brain records around the same fit_batch call (median within
2 %; sbprof's clock encloses the call), the CUDA peak measured, and the share of peak read against this GPU's peak for
the precision that did the counted MACs."""
from __future__ import annotations

import pytest
import torch

from benchmarks.gpu_truths import Figure, check, keep_report, medians
from run_helpers import brain_args, records, sbprof_run
from sbprof.measuring.flops.peak import datasheet_peak, dominant_precision

pytestmark = pytest.mark.cuda


def test_sbprof_run_of_a_recipe_on_cuda_against_the_recipes_own_cuda_events(tmp_path):
    out, recipe = tmp_path / "report", tmp_path / "recipe"
    # A 20 ms CPU spin in each forward (the recipe's Spin module) gives a step long enough that 2 % is well above
    # the microseconds between the two clocks; the products run on the GPU.
    done = sbprof_run(["--warmup", "2", "--measured", "4", "--output_folder", str(out),
                       *brain_args(recipe, "--timed", "True", "--spin_ms", "20", "--device", "cuda:0")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    keep_report("run-recipe-cuda", out / "report.md")
    train = records(out)["train"]
    assert len(train["wall_s"]) == 4 and train["cell"]["device"].startswith("cuda")
    assert train["memory"]["peak_cuda_bytes"] > 0
    events = [float(v) for v in (recipe / "fit_batch_cuda_s.txt").read_text().split()]
    # 2 warm-up (the second counts FLOPs), the 4 measured, then a memory, 2 per-module and 2 traced steps
    assert len(events) == 11 and train["extra"]["roles"][2:6] == ["measured"] * 4
    check(medians("sbprof run: step time of a recipe's fit_batch on CUDA", train["wall_s"], events[2:6], 0.02, "s",
                  one_sided=True))
    peak = train["extra"]["peak_flops"]
    precision = dominant_precision(train["extra"]["flops"]["macs_by_precision"])
    rate, why = datasheet_peak(torch.cuda.get_device_name(), precision)
    ours = f"{peak['precision']}: {peak['flops_per_s'] or peak['source']}"
    theirs = f"{precision}: {rate or why}"
    check(Figure("sbprof run: the peak the share is read against (precision of the counted MACs)", ours, theirs,
                 "same" if ours == theirs else "differs", ours == theirs))
