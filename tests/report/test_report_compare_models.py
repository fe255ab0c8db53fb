"""Markdown of a comparison and the gate's table: the numbers the series hold, with their definitions."""
from __future__ import annotations

from helpers.compare_fakes import record, results_of
from sbprof.analysis.compare_models import analyse
from sbprof.analysis.gate import gate
from sbprof.record import Energy
from sbprof.report.compare_models import render, render_comparison
from sbprof.report.gate import render_gate

SIZES = [1.0, 2.0, 4.0, 8.0]
NO_COUNTER = {"rapl": "no /sys/class/powercap: this kernel or machine exposes no RAPL counters (e.g. a VM)",
              "nvml": "not read: this variant runs on the CPU"}


def comparison():
    def energy():
        return Energy(1.0, 0.0, 1.0, unavailable=dict(NO_COUNTER), calls=4)

    records = ([record("lin", n, 0, [0.05 + 0.01 * n] * 3, energy=energy(), params=2_500_000, model="encoder_asr",
                       added=int(3e6), peak=int(7e8)) for n in SIZES]
               + [record("quad", n, 0, [0.003 * n * n] * 3, energy=energy(), params=1_000_000) for n in SIZES]
               + [record("quad", 16.0, 0, [], status="oom")])
    results = results_of(records, models=["lin", "quad"])
    results.models = {"lin": {"type": "EncoderASR"}, "quad": {"type": "EncoderDecoderASR",
                                                              "overrides": {"beam_size": 1}}}
    return results


def test_comparison_markdown_states_setup_variants_laws_points_and_energy():
    text = render_comparison(analyse(comparison()), {"cpu, 1 thread": {"latency": "plots/latency.png"}})
    assert "- **Varied**: seconds of audio per utterance: 1, 2, 4, 8, 16 (batch size 1)" in text
    assert "- **Energy**: not measurable here (rapl: no /sys/class/powercap" in text
    assert "| lin       | `encoder_asr` | EncoderASR                     | 2.50 M       | linear:" in text
    assert "EncoderDecoderASR, beam_size=1" in text and "| 2.00 [2.00, 2.00]" in text  # exact x^2: b = 2
    # 0.003 n^2 = 0.05 + 0.01 n at n = (0.01 + sqrt(0.0001 + 0.0006)) / 0.006 = 6.076: quad is faster below.
    assert "- lin and quad cross at 6.08 s: quad is faster below, lin above." in text
    assert "![latency versus seconds of audio per utterance](plots/latency.png)" in text
    # CPU cost: the fakes' CPU time equals their wall time, 0.07 s per call / 2 s of audio = 0.035.
    assert ("| lin       | 2 s                              | 70.0 [70.0, 70.0] | 1      | 28.6   | 0.0350     | 3.0"
            in text)
    assert "| quad      | 16 s                             | OOM" in text


def test_reports_are_rendered_with_csv_and_plots():
    outputs = render(analyse(comparison()))
    assert set(outputs) == {"report.md", "results.csv", "plots/latency.png", "plots/memory.png"}
    assert "(plots/memory.png)" in outputs["report.md"]
    assert outputs["results.csv"].count("\n") == 1 + 9  # header + every record
    assert outputs["plots/latency.png"].startswith(b"\x89PNG")


def test_empty_results_render_a_placeholder():
    assert "No point recorded yet." in render_comparison(analyse(results_of([])))


def test_gate_table_labels_within_run_rows_and_says_what_was_not_judged():
    levels = [0.9, 1.0, 1.1, 1.05, 0.95]
    base = results_of([record("v", 1.0, r, [lv]) for r, lv in enumerate(levels)]
                      + [record("w", 1.0, 0, [1.0, 1.01, 0.99, 1.0])])
    new = results_of([record("v", 1.0, r, [1.5 * lv]) for r, lv in enumerate(levels)]
                     + [record("w", 1.0, 0, [1.0, 1.01, 0.99, 1.0])])
    text = render_gate(gate(base, new))
    assert "| m (v) cpu/1t 1 s x1 | regressed" in text and "1.500 [" in text and "| 5 / 5" in text
    assert "| m (w) cpu/1t 1 s x1 | too few runs" in text
    assert "1 cell(s) not judged: measure at least 4 fresh-process runs a side" in text
    assert "1 regressed, 1 too few runs" in text
    within = render_gate(gate(base, new, within_run=True))
    assert "WITHIN-RUN" in within and "between-process noise (~10% here) is unseen" in within
