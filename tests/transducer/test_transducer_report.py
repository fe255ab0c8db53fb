"""Reports: only agreeing backends ranked, not-installed rows with hints, a table per setting, CSV, re-rendering."""
from __future__ import annotations

import csv
import io

from sbprof.analysis.transducer import analyse
from sbprof.jobs.render import write_files
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.report import transducer as report
from sbprof.results.store import Results, ResultStore, load_results


def render_markdown(results):
    return report.render_markdown(analyse(results))


def render_csv(results):
    return report.render_csv(analyse(results))


def write_reports(results, folder):
    return write_files(report.render(analyse(results)), folder)

RULES = {"vocab_size": 500, "joiner_dim": 512, "shapes": {"source": "synthetic", "scale": 8},
         "warmup": 20, "measured": 20}
AGREE = {"ok": True, "max_loss_rel_diff": 1e-7, "max_grad_abs_diff": 2e-5}


def make(label, wall, agreement=AGREE, status="ok", message="", mode="fixed", **extra):
    cell = Cell(model=label, threads=2, batch_size=4 if mode == "fixed" else None,
                params={"mode": mode, **({"max_frames": 200} if mode == "max_frames" else {})})
    return Measurement(label=label, cell=cell, wall_s=wall, cpu_s=wall, status=status, message=message,
                       memory=MemoryPeak(peak_rss_bytes=900_000_000, peak_rss_delta_bytes=5_000_000),
                       settings={"python": "3.11.7", "torch": "2.14.1"},
                       extra=dict(extra, agreement=agreement, install_hint=f"pip install {label}"))


RECORDS = [
    make("slow", [0.001, 0.002, 0.003]),
    make("fast_but_wrong", [0.0005] * 3, agreement={"ok": False, "message": "loss differs by 3e-02"}),
    make("quick", [0.0004, 0.0006, 0.0011]),
    make("absent", [], agreement=None, status="skipped", message="not installed: No module named 'absent'",
         not_installed=True),
    make("quick", [0.002, 0.002], mode="max_frames"),
]
RESULTS = Results("transducer", rules=RULES, records=RECORDS)


def table_rows(text, title):
    section = text.split(title, 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "backend" not in line]


def test_table_ranks_agreeing_backends_by_mean_step_time():
    table = render_markdown(RESULTS)
    rows = table_rows(table, "fixed batch size, random order (batch size 4); `cpu`, 2 thread(s)")
    assert [r.split("|")[1].strip() for r in rows] == ["quick", "slow", "fast_but_wrong", "absent"]
    assert rows[0].split("|")[2].strip() == "700"  # mean of 400, 600, 1100 µs
    assert rows[1].split("|")[3].strip() == "2,000 [1,500, 2,500]"
    assert rows[1].split("|")[4].strip().startswith("2,000 [")  # CPU per step: cpu_s = wall_s here
    assert rows[1].split("|")[5].strip() == "5"  # 5e6 bytes added = 5 MB
    assert rows[1].split("|")[7].strip() == "3.11.7 / 2.14.1"
    assert "DISAGREES: loss differs" in rows[2] and "not ranked" in rows[2]
    assert "install: pip install absent" in rows[3]
    (other,) = table_rows(table, "sorted by duration, max frames per batch (max frames 200)")
    assert other.split("|")[2].strip() == "2,000"
    assert "V = 500" in table and "scaled 1/8" in table and "Definitions" in table


def test_load_beyond_the_worker_threads_is_named():
    calm = make("calm", [0.001], loadavg_1m=1.5)
    busy = make("busy", [0.001], loadavg_1m=3.2)
    assert "1.50 to 1.50; never above the worker's thread count" in render_markdown(Results("transducer", records=[calm]))
    text = render_markdown(Results("transducer", records=[calm, busy]))
    assert "1.50 to 3.20; above the worker's thread count after busy: other processes competed" in text


def test_csv_has_one_row_per_record():
    rows = list(csv.DictReader(io.StringIO(render_csv(RESULTS))))
    assert [(r["backend"], r["mode"]) for r in rows] == [
        ("slow", "fixed"), ("fast_but_wrong", "fixed"), ("quick", "fixed"), ("absent", "fixed"),
        ("quick", "max_frames")]
    assert float(rows[0]["mean_step_us"]) == 2000.0 and rows[3]["mean_step_us"] == ""
    assert rows[4]["max_frames"] == "200" and rows[0]["batch_size"] == "4"


def test_reports_re_render_from_the_saved_results(tmp_path):
    store = ResultStore(tmp_path, Results("transducer", rules=RULES))
    store.add_many(RECORDS)
    loaded = load_results(tmp_path)
    assert loaded.records == RECORDS
    paths = write_reports(loaded, tmp_path)
    assert paths["report.md"].read_text() == render_markdown(RESULTS)
    assert paths["results.csv"].read_text() == render_csv(RESULTS)


def test_an_agreement_saved_without_its_differences_reads_ok_never_a_traceback():
    records = [make("terse", [0.001, 0.001], agreement={"ok": True})]
    rows = table_rows(render_markdown(Results("transducer", rules=RULES, records=records)),
                      "fixed batch size, random order (batch size 4); `cpu`, 2 thread(s)")
    assert "| ok " in rows[0]
