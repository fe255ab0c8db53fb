"""sbprof run on a SpeechBrain recipe written for these tests (tests/run/recipes/brain): fit then evaluate."""
from __future__ import annotations

import json

import pytest

from run_helpers import BRAIN, brain_args, measured, plain_run, records, sbprof_run

pytestmark = pytest.mark.slow


def test_each_stage_is_a_section_and_step_time_matches_the_recipes_own_clock(tmp_path):
    out, recipe = tmp_path / "report", tmp_path / "recipe"
    done = sbprof_run(["--warmup", "2", "--measured", "4", "--output_folder", str(out),
                       *brain_args(recipe, "--timed", "True")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "recipe finished" not in done.stdout  # stopped cleanly once evaluate returned
    stages = records(out)
    assert list(stages) == ["train", "valid", "test"]
    for stage in stages.values():
        assert stage["warmup"] == 2 and len(stage["wall_s"]) == 4 and stage["extra"]["kind"] == "brain"
        assert measured(stage, "utterances") == [2, 2, 2, 2]
        # 2 warm-up (the second counts FLOPs), 4 measured, then a memory, 2 per-module and 2 traced steps
        assert stage["extra"]["roles"] == ["warmup", "flops"] + ["measured"] * 4 + ["memory", "modules", "modules",
                                                                                    "traced", "traced"]
    # SpeechBrain's debug mode bounds each stage: 11 fit_batch calls, none after; checkpoints went to a temporary
    # folder, the recipe's own save folder holds none.
    outside = [float(v) for v in (recipe / "fit_batch_s.txt").read_text().split()]
    assert len(outside) == 11 and not any((recipe / "save").iterdir())
    # The hook's clock encloses the recipe's own perf_counter around fit_batch (TimedBrain overrides it): never
    # shorter; longer by the few calls between the two clocks and the recipe's own file write after its clock
    # stopped (open, write, close: 17-25 µs of a 0.5 ms step here, the fit_batch's cost all the same), and by a
    # preemption on a busy machine, which hits only the steps it falls on (a wrong span would move all four): at
    # least one agrees within 2 % and 50 µs.
    pairs = list(zip(stages["train"]["wall_s"], outside[2:6]))
    assert all(theirs <= ours for ours, theirs in pairs)
    assert min(ours - theirs - 0.02 * theirs for ours, theirs in pairs) <= 50e-6, pairs
    report = (out / "report.md").read_text()
    assert all(f"## Stage `{s}` (brain)" in report for s in ("train", "valid", "test"))


def test_continue_lets_the_recipe_run_to_its_end_with_the_same_losses(tmp_path):
    plain = plain_run(brain_args(tmp_path / "plain"), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    profiled = sbprof_run(["--continue", "--output_folder", str(tmp_path / "report"),
                           *brain_args(tmp_path / "profiled")], cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    assert "recipe finished" in profiled.stdout and "recipe finished" in plain.stdout
    losses = (tmp_path / "plain" / "losses.txt").read_text().split()
    assert len(losses) == 12  # every batch of the epoch, not only the profiled ones
    assert (tmp_path / "profiled" / "losses.txt").read_text().split() == losses
    # The recipe's own checkpoint was written where it writes it (no debug mode under --continue).
    assert len(list((tmp_path / "profiled" / "save").iterdir())) == 1
    assert len(records(tmp_path / "report")["train"]["wall_s"]) == 5
    assert len(records(tmp_path / "report")["test"]["wall_s"]) == 5  # one pass of 12 batches: the full plan


def test_render_only_rewrites_the_same_report(tmp_path):
    out = tmp_path / "report"
    assert sbprof_run(["--measured", "2", "--output_folder", str(out), *brain_args(tmp_path / "r")],
                      cwd=tmp_path).returncode == 0
    first = (out / "report.md").read_text()
    (out / "report.md").unlink()
    again = sbprof_run(["--render-only", str(out)], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "report.md").read_text() == first
    assert BRAIN.is_dir()



def test_a_misspelt_payload_key_in_a_runs_file_is_one_line_naming_it_and_exit_2(tmp_path):
    out = tmp_path / "report"
    assert sbprof_run(["--measured", "2", "--output_folder", str(out), *brain_args(tmp_path / "r")],
                      cwd=tmp_path).returncode == 0
    data = json.loads((out / "results.json").read_text())
    record = data["records"][0]
    record["extra"] = {("role" if k == "roles" else k): v for k, v in record["extra"].items()}
    (out / "results.json").write_text(json.dumps(data))
    again = sbprof_run(["--render-only", str(out)], cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"sbprof: error: {out / 'results.json'}: record {record['label']!r}: extra: unknown key 'role' of RunPayload "
        "(did you mean RunPayload.roles?)"]

HPARAMS_RUN_OPTION = """
import sys, torch, speechbrain as sb
hparams_file, run_opts, _ = sb.parse_arguments(sys.argv[1:])  # a RunOptions: only the command line's are overridden
class Brain(sb.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch.x.data)
    def compute_objectives(self, predictions, batch, stage):
        return predictions.pow(2).mean()
items = [{"id": str(i), "x": torch.ones(4)} for i in range(8)]
brain = Brain({"model": torch.nn.Linear(4, 2)}, lambda p: torch.optim.SGD(p, lr=0.1), {"max_grad_norm": 2.5},
              run_opts)
open("seen.txt", "w").write(f"{brain.max_grad_norm} {brain.debug}")
brain.fit(range(1, 3), items, items, train_loader_kwargs={"batch_size": 2, "collate_fn": sb.dataio.batch.PaddedBatch},
          valid_loader_kwargs={"batch_size": 2, "collate_fn": sb.dataio.batch.PaddedBatch})
"""


def test_a_run_option_set_in_the_hparams_still_wins_over_the_default(tmp_path):
    # Ground truth: the script unprofiled reads the hparams' max_grad_norm (2.5, the default being 5.0); sbprof's
    # debug mode must change only the debug options (a plain dict of run options overrode every hparams one).
    (tmp_path / "fit.py").write_text(HPARAMS_RUN_OPTION)
    (tmp_path / "hp.yaml").write_text("{}\n")
    done = plain_run(["fit.py", "hp.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "seen.txt").read_text() == "2.5 False"
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), "--no-trace", "fit.py", "hp.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "seen.txt").read_text() == "2.5 True"
