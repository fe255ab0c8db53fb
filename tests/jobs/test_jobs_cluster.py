"""The runner's side of a cluster: a pass's batches side by side up to a barrier, and each machine type's results
measured under its own conditions (a resume on other nodes refused)."""
from __future__ import annotations

from typing import Iterator, List

import pytest

from sbprof.analysis.intervals import RepeatPolicy
from sbprof.base.errors import ConfigError
from sbprof.cluster.spec import check_executor
from sbprof.jobs.cluster import TypedPlan
from sbprof.jobs.plan import Barrier, Batch, Group, Item, Records, interleaved_passes
from sbprof.jobs.runner import View
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.results import ResultStore


def walk(folder, side_by_side: bool) -> List[str]:
    """The steps of two groups over two runs; a batch's records are stored at once (locally), or at the next
    barrier (what a cluster's executor does there: every batch sent comes in)."""
    folder.mkdir()
    store = ResultStore(folder, Results("profile"))
    view = View(store, retry_failed=False, side_by_side=side_by_side)
    sent: List[Item] = []

    def batch(cells: List[Cell]) -> Batch:
        return Batch(name=cells[0].model, module="m", payload={}, items=[Item(c, c.model) for c in cells], log="l")

    def after(b: Batch) -> Iterator[Records]:
        assert all(view.get(i.cell) is not None for i in b.items), "read before its batch was in"
        yield Records([])

    def measure(items: List[Item]) -> None:
        store.add_many(Measurement(label="x", cell=i.cell, wall_s=[0.1]) for i in items)

    out = []
    for step in interleaved_passes(view, lambda: [Group([Cell(model=m)], batch) for m in "ab"],
                                   RepeatPolicy.fixed(2), 0, after_batch=after):
        if isinstance(step, Batch):
            out.append(f"{step.name}{step.items[0].cell.run}{'*' if step.concurrent else ''}")
            if side_by_side:
                sent.extend(step.items)
            else:
                measure(step.items)
        elif isinstance(step, Barrier):
            measure(sent)
            sent.clear()
            out.append("|")
        else:
            out.append("r")
    return out


def test_a_clusters_batches_of_one_pass_run_side_by_side_and_what_reads_them_comes_after_the_barrier(tmp_path):
    assert walk(tmp_path / "local", side_by_side=False) == ["a0", "r", "b0", "r", "a1", "r", "b1", "r"]
    assert walk(tmp_path / "cluster", side_by_side=True) == ["a0*", "b0*", "|", "r", "r", "a1*", "b1*", "|", "r", "r",
                                                             "|"]


class Header:
    def __init__(self) -> None:
        self.machine = {"hostname": "login1", "cpu": "Xeon", "cpu_count": 4, "torch": "2.14.1", "python": "3.11"}

    def header(self) -> Results:
        return Results("profile", rules={"warmup": 1}, machine=dict(self.machine))


def test_a_machine_types_results_are_its_conditions_and_a_resume_on_other_nodes_is_refused(tmp_path):
    spec = check_executor({"kind": "slurm", "time": 30, "machines": {"a": {"partition": "p1"}}}, "p.yaml")
    header = TypedPlan(Header(), spec, spec.machines[0]).header()
    assert header.machine == {"hostname": "a (slurm)", "torch": "2.14.1", "python": "3.11", "cluster": {
        "executor": "slurm", "type": "a", "options": {"exclusive": True, "partition": "p1"}}}  # no login node's CPU
    ResultStore(tmp_path, header).save()
    longer = check_executor({"kind": "slurm", "time": 90, "machines": {"a": {"partition": "p1"}}}, "p.yaml")
    ResultStore(tmp_path, TypedPlan(Header(), longer, longer.machines[0]).header())  # a time limit changes nothing
    moved = check_executor({"kind": "slurm", "machines": {"a": {"partition": "p2"}}}, "p.yaml")
    with pytest.raises(ConfigError, match="measured under other conditions"):
        ResultStore(tmp_path, TypedPlan(Header(), moved, moved.machines[0]).header())
