"""The ``executor`` key: each mistake one line, exit code 2, nothing written; a cluster's devices are the nodes'."""
from __future__ import annotations

import pytest

from helpers.cluster_runs import sweep
from helpers.fake_interfaces import use_test_environment
from helpers.refusals import assert_refused
from sbprof.base.errors import ConfigError
from sbprof.cli import main
from sbprof.cluster.spec import check_executor
from sbprof.jobs.preamble import Defaults, check_preamble

DEFAULTS = Defaults(warmup=1, measured=2, output_folder="out")


@pytest.mark.parametrize("tree, expected", [
    ({"kind": "pbs"}, "executor.kind must be one of local, slurm, ray, got 'pbs'"),
    ({"kind": "slurm"}, "executor.machines must name at least one machine type"),
    ({"kind": "slurm", "machines": {"a/b": {}}}, "'a/b' cannot name a machine type"),
    ({"kind": "slurm", "machines": {"a": {"price_per_hour": -1}}}, "price_per_hour must be a positive number"),
    ({"kind": "slurm", "machines": {"a": {"price_per_hour": 1}}}, "name its currency with executor.currency"),
    ({"kind": "slurm", "machines": {"a": {"job_name": "x"}}}, "a.job_name: sbprof sets this sbatch option itself"),
    ({"kind": "slurm", "machines": {"a": {"no-requeue": True}}}, "sbprof sets this sbatch option itself"),
    ({"kind": "slurm", "machines": {"a": {"gres": ["gpu:1"]}}}, "a.gres must be one sbatch value"),
    ({"kind": "slurm", "machines": {"a": {"cpu_threads": [2, 2]}}}, "cpu_threads lists a value twice"),
    ({"kind": "slurm", "machines": {"a": {"devices": "gpu"}}}, "'gpu' is not a device"),
    ({"kind": "ray", "adress": "auto", "machines": {"a": {}}}, "unknown key 'adress' for kind ray (did you mean"),
    ({"kind": "local", "machines": {"a": {}}}, "kind local runs worker processes on this machine"),
])
def test_each_mistake_in_the_executor_is_one_line_naming_it(tree, expected):
    with pytest.raises(ConfigError, match=None) as caught:
        check_executor(tree, "p.yaml")
    assert str(caught.value).startswith("p.yaml: executor") and expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_clusters_devices_and_threads_are_its_nodes_not_this_machines():
    tree = {"devices": "cpu", "executor": {"kind": "slurm", "machines": {
        "a100": {"devices": "cuda:0", "cuda_threads": 64, "partition": "gpu"},
        "cpu64": {"cpus_per_task": 64, "cpu_threads": [1, 64]}}}}
    pre = check_preamble(tree, "p.yaml", {}, DEFAULTS)  # no CUDA here, 2 cores: accepted for the nodes
    a100, cpu64 = pre.executor.machines
    assert (a100.devices, a100.cuda_threads, cpu64.devices, cpu64.cpu_threads) == (("cuda:0",), 64, ("cpu",), (1, 64))
    assert pre.executor.options_of(a100) == {"exclusive": True, "partition": "gpu"}
    assert type(pre).from_dict(pre.to_dict()) == pre  # it travels in every batch's payload


def test_no_executor_is_the_local_run_as_always():
    pre = check_preamble({"devices": "cpu", "cpu_threads": 1, "executor": {"kind": "local"}}, "p.yaml", {}, DEFAULTS)
    assert pre.executor is None and pre.settings[0].device == "cpu"


def test_the_command_line_refuses_a_bad_executor_before_writing_anything(tmp_path, monkeypatch, capsys):
    use_test_environment(monkeypatch, tmp_path / "cache")
    path = sweep(tmp_path, "out", "executor: {kind: slurm, machines: {a: {price_per_hour: 2}}}\n")
    assert_refused(main(["profile", str(path), "--noprogressbar"]), capsys, "name its currency",
                   nothing_in=tmp_path / "out")
