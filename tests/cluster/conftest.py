"""A real one-node Slurm (``.ci/slurm.sh``) and a real two-node Ray cluster for the tests marked ``slurm`` and ``ray``.

Either skips with the reason when it cannot be had here (no root, Slurm not installed, submitit or Ray not
installed). The Slurm daemons stay up after the tests (``.ci/run`` stops them; two test processes share them).
"""
from __future__ import annotations

import shutil
import subprocess
from typing import Iterator

import pytest

from helpers.cluster_runs import SCRIPT, RayCluster
from helpers.fake_interfaces import use_test_environment


@pytest.fixture(scope="session")
def slurm() -> Iterator[str]:
    """The one-node Slurm's configuration file (``SLURM_CONF`` is set for the session)."""
    pytest.importorskip("submitit", reason="submitit is not installed (pip install -e '.[cluster]')")
    if shutil.which("slurmctld") is None:
        pytest.skip("Slurm is not installed here (.ci/slurm.sh install, as root)")
    started = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        why = (started.stderr.strip().splitlines() or ["no reason given"])[-1]
        pytest.skip(f"no Slurm could be started here: {why}")
    conf = started.stdout.strip().splitlines()[-1].split("=", 1)[1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", conf)
        yield conf


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory) -> Iterator[RayCluster]:
    """Ray's two-node test cluster, its nodes started with the test helpers importable (a user's nodes need their
    model code importable the same way)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[cluster]')")
    with pytest.MonkeyPatch.context() as mp:
        use_test_environment(mp, tmp_path_factory.mktemp("ray-cache"))
        cluster = RayCluster(["ma", "mb"])
    try:
        yield cluster
    finally:
        cluster.close()
