"""The cluster report formats its summary: each type's nodes and floor, the cost per 1,000 hours with its currency,
the cheapest choice, and the types side by side."""
from __future__ import annotations

from sbprof.analysis.cluster import Price, analyse_cluster
from sbprof.record import Cell, Env, Measurement
from sbprof.record.results import Results
from sbprof.report.cluster import render


def results(wall, node):
    return Results("profile", records=[
        Measurement(label="c", cell=Cell(model="m", audio_s=1.0, batch_size=1, run=r), wall_s=[wall], cpu_s=[wall],
                    audio_seconds=1.0, env=Env(cpu="EPYC", cpu_count=4),
                    extra={"cluster": {"node": f"{node}{r % 2}", "type": node}}) for r in range(4)])


def test_the_report_names_the_cheapest_real_time_type_its_cost_and_the_types_without_a_price():
    summary = analyse_cluster("profile", [("gpu", "g", results(0.05, "g")), ("cpu", "c", results(0.5, "c"))],
                              {"gpu": Price(4.0)}, "EUR")
    report = render(summary)["report.md"]
    assert "## Cost of 1,000 hours of audio (EUR)" in report
    assert "200 EUR [200, 200]" in report and "no price" in report  # 0.05 x 4 EUR x 1000; cpu has no price
    assert "- **m**: machine type **gpu**, m, cpu 1 thread, 1 s x 1: 200 EUR [200, 200]" in report
    assert "EPYC (4 logical cores)" in report and "| gpu" in report and "g0" in report and "g1" in report
    assert "## Machine types side by side" in report and "### m: RTF, machines and settings as columns" in report
