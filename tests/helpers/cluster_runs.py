"""Helpers of the cluster tests (tests/cluster): a tiny sweep with an executor, the command line, Ray's test cluster."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from helpers.fake_interfaces import write_model_folder, write_sweep_yaml

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
