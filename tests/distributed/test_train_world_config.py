"""Bad distributed input to ``sbprof train``: one line, exit code 2, nothing written; oversubscription flagged."""
import json

import pytest

from helpers.train_tiny import tiny_overrides
from sbprof.cli import main
from sbprof.train.config import validate


@pytest.mark.parametrize("override, message", [
    ({"world_sizes": [0]}, "world_sizes must hold only positive integers, got 0 in [0]"),
    ({"world_sizes": [1, 1]}, "world_sizes lists a value twice: [1, 1]"),
    ({"world_sizes": "two"}, "world_sizes must be a non-empty list of positive integers, got 'two'"),
    ({"world_sizes": [3]}, "data.batch_size 2 cannot be split evenly over [3] ranks"),
    ({"world_sizes": [2], "scaling": ["strng"]}, "scaling: unknown scaling 'strng'"),
    ({"world_sizes": [64], "devices": "cuda"}, "CUDA"),  # no GPU here, or fewer than one per rank (NCCL)
])
def test_bad_world_sizes_are_one_line_exit_2_and_nothing_written(tmp_path, capsys, override, message):
    config = tmp_path / "t.yaml"
    config.write_text(json.dumps(tiny_overrides(tmp_path / "out", **override)))
    assert main(["train", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err and message in err
    assert not (tmp_path / "out").exists()


def test_under_torchrun_world_sizes_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = tmp_path / "t.yaml"
    config.write_text(json.dumps(tiny_overrides(tmp_path / "out", world_sizes=[2])))
    assert main(["train", str(config)]) == 2
    assert "under torchrun (this process is rank 0 of 2) leave it out" in capsys.readouterr().err


def test_a_world_beyond_the_cores_is_flagged_oversubscribed(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    cfg = validate(tiny_overrides(tmp_path, world_sizes=[1, 2, 4], scaling=["weak"]), "t.yaml")
    assert cfg.world_sizes == (1, 2, 4)
    assert [w for w in cfg.preamble.warnings if "oversubscribed" in w] == [
        "world size 4 x 1 thread(s) exceeds this machine's 2 logical cores: that world is oversubscribed"]
