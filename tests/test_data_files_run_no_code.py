"""What sbprof reads as data never runs code, whoever wrote it: results files, rank files, a meter's power log and
a transducer shape file, each holding a payload that would run a command if it were loaded as YAML or pickle.

(A configuration is HyperPyYAML, whose tags run code by design: it must be trusted, as README.md and
docs/profile.md say.) Each file here is refused in one line, and the payload's marker file is never made.
"""
from __future__ import annotations

import json
import os
import pickle

import pytest

from sbprof.base.errors import ConfigError


class _Touch:
    """Unpickling this calls os.system: what a hostile pickle does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _yaml_payload(marker) -> str:
    return f"!!python/object/apply:os.system ['touch {marker}']\nx: !apply:os.system ['touch {marker}']\n"


def test_a_results_file_is_read_as_json_only(tmp_path):
    from sbprof.results import load_results

    marker = tmp_path / "ran"
    (tmp_path / "results.json").write_text(_yaml_payload(marker))
    with pytest.raises(ConfigError, match="results.json: not a readable results file"):
        load_results(tmp_path)
    assert not marker.exists()


def test_a_rank_file_is_read_as_json_lines_only(tmp_path):
    from sbprof.distributed.merge import merge_run

    marker = tmp_path / "ran"
    header = {"header": {"format": "sbprof-rank", "version": 1, "run_id": "r", "rank": 0, "world_size": 1}}
    (tmp_path / "rank00000.jsonl").write_text(json.dumps(header) + "\n" + _yaml_payload(marker))
    with pytest.raises(ConfigError, match="rank00000.jsonl: line 2 is not a rank-file line"):
        merge_run(tmp_path)
    assert not marker.exists()


def test_a_power_log_is_read_as_csv_only(tmp_path):
    from sbprof.measuring.energy.external import load_power_csv

    marker = tmp_path / "ran"
    log = tmp_path / "meter.csv"
    log.write_text("timestamp,watts\n" + _yaml_payload(marker))
    with pytest.raises(ConfigError, match="meter.csv, line 2: cannot read a sample"):
        load_power_csv(str(log))
    log.write_bytes(pickle.dumps(_Touch(marker)))
    with pytest.raises(ConfigError, match="meter.csv"):
        load_power_csv(str(log))
    assert not marker.exists()


def test_a_tensor_shape_file_never_unpickles_code(tmp_path):
    """torch.load of a pickle runs what it names unless weights_only: sbprof loads shape files with it, and a
    refusal is one line (before: a raw UnpicklingError traceback, and safe only by torch's default)."""
    import torch

    from sbprof.transducer.shapes import load_shape_file

    marker = tmp_path / "ran"
    path = tmp_path / "shapes.pt"
    torch.save({"rows": _Touch(marker)}, path)
    with pytest.raises(ConfigError, match=r"shapes.pt' is not a tensor file sbprof reads .*weights_only=True"):
        load_shape_file(path)
    assert not marker.exists()
    torch.save(torch.tensor([[10, 2], [7, 3]], dtype=torch.int32), path)  # the real thing still loads
    assert load_shape_file(path) == [(10, 2), (7, 3)]
