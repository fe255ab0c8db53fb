"""The cluster tests' fixtures and helpers (tests/cluster): a real one-node Slurm (``.ci/slurm.sh``), Ray's own
two-node test cluster, a tiny sweep with an executor, the command line.

Either fixture skips with the reason when it cannot be had here (no root, Slurm not installed, submitit or Ray not
installed). The Slurm daemons stay up after the tests (``.ci/run`` stops them; two test processes share them).
A test module imports the fixtures it uses.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder, write_sweep_yaml

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "slurm.sh"
"""Starts and stops the one-node Slurm of the tests marked ``slurm`` (also used by .ci/run)."""
BUSY = {"method": "process", "args": ["wavs", "wav_lens"]}


class RayCluster:
    """Ray's own multi-node test cluster on this machine: a head with no CPU, and one node per machine type, each
    with one CPU and one unit of its type's custom resource."""

    def __init__(self, types: List[str]):
        import ray
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        self.nodes: Dict[str, Any] = {t: self.cluster.add_node(num_cpus=1, resources={t: 1}) for t in types}
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def node_id(self, machine: str) -> str:
        return self.nodes[machine].node_id

    def kill(self, machine: str) -> None:
        self.cluster.remove_node(self.nodes[machine], allow_graceful=False)

    def close(self) -> None:
        import ray

        ray.shutdown()
        self.cluster.shutdown()


def sweep(tmp_path: Path, name: str, executor: Optional[str], rtf: float = 0.05, lengths: Any = (0.5,),
          batch_sizes: Any = (1, 2), runs: int = 1, measured: int = 2) -> Path:
    """A tiny sweep of the busy model (``rtf`` seconds of spin per second of audio) writing into
    ``tmp_path/name``, with ``executor`` (YAML text) appended; the YAML's path."""
    busy = tmp_path / f"busy-{rtf:g}"
    if not busy.exists():
        write_model_folder(busy, rtf=rtf)
    path = write_sweep_yaml(tmp_path / f"{name}.yaml", str(busy), "helpers.fake_interfaces.BusyInterface", **BUSY,
                            lengths=list(lengths), batch_sizes=list(batch_sizes), runs=runs, measured=measured,
                            output_folder=str(tmp_path / name))
    if executor:
        path.write_text(path.read_text() + executor)
    return path


def sbprof_command(*args: str) -> List[str]:
    return [sys.executable, "-m", "sbprof", "profile", *args, "--noprogressbar"]


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
