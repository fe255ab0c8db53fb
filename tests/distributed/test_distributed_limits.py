"""The merged report's "What limits this" on built sections: each rule over and under its threshold, on a quiet
and on a crowded machine (the real runs: tests/distributed/test_torchrun_brain.py and test_torchrun_run.py).
"""
import pytest

from sbprof.analysis.rank_limits import section_limits
from sbprof.analysis.rank_sections import SectionSummary, StragglerCost


def _section(rows=(), **figures):
    return SectionSummary("s", 2, list(rows), [], [], None, None, None, None, None, None, None, None, None, **figures)


def busy_comm_figures(s):
    v = section_limits([s]).verdicts[0]
    return {f.name: pytest.approx(f.value) for f in v.figures}


def _row(rank, comm_s, wait_s):
    from sbprof.analysis.rank_rows import RankRow

    return RankRow(rank, "h", 0, rank, 5, None, None, comm_s, None, wait_s, None, None, None, None, "", "done", None)


def test_communication_and_time_between_steps_fire_over_their_thresholds_only():
    # Each rank's communication less its wait for the other: 30 ms and 30 ms (rank 0 waited 50 ms of its 80).
    rows = [_row(0, 0.08, 0.05), _row(1, 0.03, 0.0)]
    busy = _section(rows=rows, comm_step_s=0.1, between_s=0.02, between_step_s=0.1)
    assert [v.rule for v in section_limits([busy]).verdicts] == ["communication", "data loading"]
    between = section_limits([busy]).verdicts[1]
    assert between.sentence.startswith("The time between steps") and between.figures[0].name == "between steps"
    assert busy_comm_figures(busy) == {"communication less wait": 0.03, "step": 0.1}
    calm = _section(rows=[_row(0, 0.069, 0.05), _row(1, 0.019, 0.0)], comm_step_s=0.1, between_s=0.011,
                    between_step_s=0.1)
    assert section_limits([calm]).verdicts == []


def test_a_section_with_ranks_but_no_common_step_cannot_decide_the_straggler():
    row = _row(1, None, None)
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None)
    assert section_limits([s]).undecided == ["straggler (s): no step that every rank reported"]
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None,
                       straggler_cost=StragglerCost(0.004, 5), step_s=0.1)
    assert section_limits([s]).verdicts == []  # 4 % of the step: under the threshold
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None,
                       straggler_cost=StragglerCost(0.006, 5), step_s=0.1)
    assert [v.rule for v in section_limits([s]).verdicts] == ["straggler"]  # 6 %: over it


def _load(others, threads=2, cores=2.0):
    from sbprof.analysis.rank_load import HostLoad

    return HostLoad("h", 0, cores, threads, others, True, 3.0)


def _spinner(crowding, cpu_excess_s, busy_cost_s=0.05):
    """Rank 1 slowest by busy time (50 ms over rank 0 a step), with a given CPU excess, every rank's communication
    40 ms less its wait: the communication rule would fire, as would a data wait of 30 % of the loop."""
    from sbprof.analysis.rank_sections import CpuExcess

    rows = [_row(0, 0.09, 0.05), _row(1, 0.04, 0.0)]
    return SectionSummary("s", 2, rows, rows, [], rows[1], None, None, None, None, None, None, None, None,
                          straggler_cost=StragglerCost(busy_cost_s, 5), step_s=0.1, comm_step_s=0.1,
                          cpu_excess=CpuExcess(1, cpu_excess_s), crowding=crowding, data_wait_s=0.03,
                          data_wait_step_s=0.07, between_s=0.03)


def test_on_a_crowded_machine_own_work_names_the_straggler_by_cpu_time_and_wall_time_verdicts_withhold():
    limits = section_limits([_spinner(_load(others=1.0), cpu_excess_s=0.04)])
    (v,) = limits.verdicts  # communication and data loading withheld
    assert v.rule == "straggler" and v.sentence.startswith("Rank 1 does the most work: 40 ms more CPU time per step")
    assert [(f.name, f.value) for f in v.figures] == [("CPU excess", 0.04), ("step", 0.1), ("other work", 1.0)]
    assert "crowded: 2 rank thread(s) beside 1.0 core(s) of other work" in v.sentence
    (why,) = limits.undecided
    assert why.startswith("s: the machine was crowded") and "no communication or data loading verdict" in why


def test_balanced_ranks_that_waited_for_a_core_are_no_straggler_and_the_report_says_why():
    # Busy time says rank 1 costs 50 ms a step; CPU time says both ranks did the same work (0.4 ms apart).
    limits = section_limits([_spinner(_load(others=1.0), cpu_excess_s=0.0004)])
    assert limits.verdicts == []
    (why,) = limits.undecided
    assert "straggler judged on CPU time per step" in why and "is 0.4 ms over the median rank's, under 5 %" in why


def test_on_a_quiet_machine_busy_time_names_the_straggler_with_the_load_it_was_measured_at():
    quiet = _load(others=0.1)
    limits = section_limits([_spinner(quiet, cpu_excess_s=0.049)])
    assert [v.rule for v in limits.verdicts] == ["straggler", "communication", "data loading"]
    v = limits.verdicts[0]
    assert v.sentence.startswith("Rank 1 is slowest and costs every step 50.0 ms, 50 % of the 100 ms step (measured "
                                 "at 2 rank thread(s) beside 0.1 core(s) of other work")
    assert "its CPU time per step exceeds the median rank's by 49 ms" in v.sentence
    data = limits.verdicts[2]  # the data wait's share of the loop (step + between): 30 ms of 100 ms
    assert data.sentence.startswith("Waiting for data takes 30 % of each loop iteration")
    assert limits.undecided == []


def test_the_data_loading_verdict_reads_the_data_wait_not_the_time_between_steps():
    # 40 ms between steps, of which 2 ms waiting for the DataLoader: the loop's other work, not data loading.
    s = _section(step_s=0.06, data_wait_s=0.002, data_wait_step_s=0.06, between_s=0.04, between_step_s=0.06,
                 crowding=_load(others=0.0))
    assert s.data_wait_share == pytest.approx(0.002 / 0.1)
    assert section_limits([s]).verdicts == []


def test_a_hosts_other_work_is_its_busy_cores_less_every_ranks_own():
    from sbprof.analysis.rank_load import HostAccumulator, most_crowded

    acc = HostAccumulator()
    for own in (0.9, 0.3):  # each rank saw 2.5 cores busy; its own were 0.9 and 0.3
        acc.add(1, {"window_s": 2.0, "busy_cpu_s": 5.0, "own_cpu_s": 2 * own, "cores": 2.0}, load=6.0)
    load = acc.result("h", 0)
    assert load.measured and load.others == pytest.approx(1.3) and load.crowded
    quiet = HostAccumulator()
    quiet.add(1, {"window_s": 1.0, "busy_cpu_s": 1.05, "own_cpu_s": 1.0, "cores": 4.0}, load=None)
    assert not quiet.result("h", 1).crowded
    old = HostAccumulator()  # an older rank file: no counters, the 1-minute load average less the rank threads
    old.add(2, None, load=3.5, cores=4)
    assert old.result("h", 2).others == pytest.approx(1.5) and not old.result("h", 2).measured
    assert most_crowded([quiet.result("h", 1), load, None]) is load


def test_gpu_ranks_are_never_judged_crowded_by_the_cpu_cores():
    from sbprof.analysis.distributed import RunAnalysis
    from sbprof.record import Cell, Measurement

    def rank(r, device):
        return Measurement(f"r{r}", Cell(model="step", rank=r, device=device), wall_s=[0.1] * 3, cpu_s=[0.1] * 3,
                           settings={"load_1min": 40.0, "distributed": {"host": "h"}},
                           extra={"rank": {"steps": [0, 1, 2], "comm_s": [0.01] * 3},
                                  "machine": {"window_s": 1.0, "busy_cpu_s": 8.0, "own_cpu_s": 1.0, "cores": 2.0}})
    for device, crowded in (("cpu", True), ("cuda:0", None)):
        run = RunAnalysis(world_size=2)
        records = [rank(0, device), rank(1, device)]
        for m in records:
            run.add_steps(m)
        for m in records:
            run.add_rank(m)
        (s,) = run.sections()
        assert (s.crowding.crowded if s.crowding is not None else None) is crowded
