"""A sweep through a real one-node Slurm (two partitions standing for two machine types): the local run's records,
a cancelled job's cells recorded with Slurm's reason and measured again on request, a driver killed and run again.
"""
from __future__ import annotations

import json
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import List

import pytest

from helpers.cluster_runs import sbprof_command, slurm, sweep  # noqa: F401 (slurm: a fixture)
from helpers.fake_interfaces import use_test_environment
from helpers.refusals import assert_refused
from sbprof.analysis.cluster import Price, cost_rows
from sbprof.cli import main
from sbprof.registry import render_only, run
from sbprof.results import load_results

pytestmark = pytest.mark.slurm

TWO_TYPES = """executor:
    kind: slurm
    currency: EUR
    machines:
        ma: {partition: ma, price_per_hour: 2.0}
        mb: {partition: mb, constraint: mb, price_per_hour: 0.5}
"""
ONE_TYPE = """executor:
    kind: slurm
    exclusive: false
    machines:
        ma: {partition: ma}
"""
"""Not exclusive: the two test processes' jobs share the one node instead of queueing."""


def kinds(records):
    return sorted((m.cell.key(), m.status) for m in records)


def worker_starts(folder: Path) -> int:
    """Worker processes started for this folder: the supervisor writes one line per start in the worker logs."""
    return sum(line.startswith("--- ") for log in (folder / "logs").glob("*.log") for line in log.read_text().splitlines())


def events(folder: Path) -> List[dict]:
    return [json.loads(line) for path in sorted((folder / "jobs").glob("*.events"))
            for line in path.read_text().splitlines() if line.strip()]


def wait_for(condition, what: str, driver: subprocess.Popen, timeout_s: float = 240.0) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert driver.poll() is None, f"the driver ended (exit code {driver.returncode}) before {what}"
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_sweep_through_slurm_gives_the_local_records_per_machine_type_from_jobs_on_its_partition(
        tmp_path, monkeypatch, slurm):
    use_test_environment(monkeypatch, tmp_path / "cache")
    run("profile", str(sweep(tmp_path, "local", None)), noprogressbar=True, log=lambda line: None)
    outcome = run("profile", str(sweep(tmp_path, "cluster", TWO_TYPES)), noprogressbar=True,
                  log=lambda line: None)
    local = load_results(tmp_path / "local").records
    assert len(local) == 2 and all(m.ok for m in local)
    for machine in ("ma", "mb"):
        folder = tmp_path / "cluster" / "machines" / machine
        records = load_results(folder).records
        assert kinds(records) == kinds(local)  # equal in kind and count
        for m in records:  # on a node of its type: Slurm's own environment in the job says the partition
            stamp = m.extra["cluster"]
            assert (stamp["type"], stamp["partition"], stamp["executor"]) == (machine, machine, "slurm")
            assert stamp["node"] and stamp["job"]
            assert min(w / m.audio_seconds for w in m.wall_s) >= 0.05  # a spin never ends early
        assert (folder / "report.md").is_file()
        assert worker_starts(folder) == 1
        script, = (folder / "jobs" / "slurm").glob("*/*_submission.sh")
        assert {"#SBATCH --exclusive", "#SBATCH --no-requeue", f"#SBATCH --partition={machine}"} <= set(
            script.read_text().splitlines())  # exclusive by default, never requeued
    assert outcome.measured == 4 and outcome.failed == 0
    report = (tmp_path / "cluster" / "report.md").read_text()
    assert "## Cheapest" in report and "machine type **mb**" in report  # a quarter of ma's price per hour
    measured = load_results(tmp_path / "cluster" / "machines" / "mb")
    for row in cost_rows("mb", measured, Price(per_hour=0.5)):  # one run: its median batch RTF x 0.5 EUR x 1000
        m = next(r for r in measured.records if r.cell == row.cell)
        rtf = statistics.median(w / m.audio_seconds for w in m.wall_s)
        assert row.cost.median == pytest.approx(rtf * 0.5 * 1000, rel=1e-12)
    for written in (tmp_path / "cluster").rglob("report.md"):
        written.unlink()
    assert {"report.md", "ma/report.md", "mb/report.md"} <= set(render_only(tmp_path / "cluster", job="profile"))


def test_a_cancelled_job_records_its_cells_with_slurms_reason_and_retry_failed_measures_them(
        tmp_path, monkeypatch, slurm):
    use_test_environment(monkeypatch, tmp_path / "cache")
    path = sweep(tmp_path, "out", ONE_TYPE, rtf=1.0, lengths=(0.5, 1.0), batch_sizes=(1,))
    folder = tmp_path / "out" / "machines" / "ma"
    driver = subprocess.Popen(sbprof_command(str(path)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: any(e["event"] == "result" for e in events(folder)) if (folder / "jobs").exists() else False,
                 "the job's first record", driver)
        job = json.loads((folder / "cluster-jobs.json").read_text())["jobs"][0]["job"]
        subprocess.run(["scancel", job], check=True, timeout=60)
        out, _ = driver.communicate(timeout=240)
    finally:
        driver.kill()
    records = load_results(folder).records
    assert sorted(m.status for m in records) == ["error", "ok"], out
    failed = next(m for m in records if not m.ok)
    assert f"Slurm job {job} ended CANCELLED" in failed.message and "this cell was not measured" in failed.message
    assert failed.extra["cluster"]["job"] == job
    retried = run("profile", str(path), noprogressbar=True, retry_failed=True,
                  log=lambda line: None)
    assert retried.measured == 1 and retried.failed == 0
    assert all(m.ok for m in load_results(folder).records)


def test_a_driver_killed_mid_sweep_and_run_again_measures_no_cell_twice(tmp_path, monkeypatch, slurm):
    use_test_environment(monkeypatch, tmp_path / "cache")
    path = sweep(tmp_path, "out", ONE_TYPE, rtf=0.5, runs=2)  # two passes: two jobs, one after the other
    folder = tmp_path / "out" / "machines" / "ma"
    driver = subprocess.Popen(sbprof_command(str(path)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: any(e["event"] == "result" for e in events(folder)) if (folder / "jobs").exists() else False,
                 "the first job's first record", driver)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    assert json.loads((folder / "cluster-jobs.json").read_text())["jobs"], "the running job is in the ledger"
    again = subprocess.run(sbprof_command(str(path)), capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "taken over" in again.stdout
    records = load_results(folder).records
    assert len(records) == 4 and all(m.ok for m in records)  # 2 cells x 2 runs, none lost
    assert worker_starts(folder) == 2  # one worker per batch: the killed driver's job was not sent again
    assert len({m.extra["cluster"]["job"] for m in records}) == 2
    assert json.loads((folder / "cluster-jobs.json").read_text())["jobs"] == []


def test_an_option_slurm_refuses_is_one_line_before_any_job_of_any_type_is_sent(tmp_path, monkeypatch, capsys, slurm):
    use_test_environment(monkeypatch, tmp_path / "cache")
    path = sweep(tmp_path, "out", TWO_TYPES.replace("partition: mb", "partition: nope"))
    assert_refused(main(["profile", str(path), "--noprogressbar"]), capsys,
                   "executor.machines.mb: Slurm would refuse its jobs: sbatch: error: invalid partition specified: nope",
                   nothing_in=tmp_path / "out")
