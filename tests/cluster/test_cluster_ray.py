"""A sweep through Ray's own two-node test cluster (one node per machine type, each its custom resource): cells land
only on nodes of their type, and a node killed mid-batch leaves error records while the rest completes."""
from __future__ import annotations

import threading
import time

import pytest

from helpers.cluster_runs import ray_cluster, sweep  # noqa: F401 (ray_cluster: a fixture)
from helpers.fake_interfaces import use_test_environment
from sbprof.registry import run
from sbprof.results import load_results

pytestmark = pytest.mark.ray


def ray_types(address: str) -> str:
    return f"""executor:
    kind: ray
    address: {address}
    machines:
        ma: {{}}
        mb: {{}}
"""


def test_cells_land_only_on_nodes_of_their_type_and_a_node_killed_mid_batch_leaves_error_records(
        tmp_path, monkeypatch, ray_cluster):
    """One test, so that Ray's cluster starts once (half a minute on a busy 2-core machine)."""
    use_test_environment(monkeypatch, tmp_path / "cache")
    outcome = run("profile", str(sweep(tmp_path, "out", ray_types(ray_cluster.address))), noprogressbar=True,
                  log=lambda line: None)
    assert outcome.measured == 4 and outcome.failed == 0
    for machine in ("ma", "mb"):
        records = load_results(tmp_path / "out" / "machines" / machine).records
        assert len(records) == 2 and all(m.ok for m in records)
        assert {m.extra["cluster"]["ray_node"] for m in records} == {ray_cluster.node_id(machine)}
        assert all(m.extra["cluster"]["type"] == machine for m in records)
        assert (tmp_path / "out" / "machines" / machine / "logs").is_dir()  # the node's worker log, sent back

    # Then mb's node is killed while it measures its two cells (1 s of spin per second of audio).
    path = sweep(tmp_path, "killed", ray_types(ray_cluster.address), rtf=1.0, lengths=(0.5, 1.0), batch_sizes=(1,))
    done = {}
    runner = threading.Thread(target=lambda: done.update(outcome=run("profile", str(path), noprogressbar=True,
                                                                     log=lambda line: None)))
    runner.start()
    results = tmp_path / "killed" / "machines" / "mb" / "results.json"
    end = time.monotonic() + 240
    while not (results.exists() and load_results(results).records):  # mb's first cell measured
        assert time.monotonic() < end and runner.is_alive(), "mb measured nothing"
        time.sleep(0.2)
    ray_cluster.kill("mb")
    runner.join(300)
    assert not runner.is_alive()
    lost = load_results(results).records
    assert sorted(m.status for m in lost) == ["error", "ok"]
    failed = next(m for m in lost if not m.ok)
    assert "the Ray task ended before its batch did" in failed.message and failed.extra["cluster"]["type"] == "mb"
    kept = load_results(tmp_path / "killed" / "machines" / "ma").records
    assert len(kept) == 2 and all(m.ok for m in kept)
    assert done["outcome"].failed == 1 and done["outcome"].measured == 3
