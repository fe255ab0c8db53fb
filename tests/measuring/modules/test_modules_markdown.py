"""The breakdown tables: nesting, units, CUDA and memory tables only when measured."""
from sbprof.record.breakdown import ModuleBreakdown, ModuleRow
from sbprof.analysis.breakdown import breakdown_steps
from sbprof.report.modules_markdown import render_breakdown


def render(data):
    typed = ModuleBreakdown.from_dict(data)
    return render_breakdown(typed, breakdown_steps(typed))


def breakdown(cuda=False):
    rows = [ModuleRow("enc", "Encoder", 0, 1.0, 30.0, 0.6, 10.0, 2.0, 20.0, 4.0),
            ModuleRow("enc.layers.0", "Layer", 1, 1.0, 24.0, 0.48, 8.0, 8.0, 16.0, 16.0),
            ModuleRow("optimizer", "", 0, 1.0, 5.0, 0.1),
            ModuleRow("(other)", "", 0, 0.0, 15.0, 0.3)]
    if cuda:
        for r in rows:
            r.cuda_total_ms, r.cuda_share = r.total_ms / 10, r.share
    return ModuleBreakdown("train", "light", 2, [48.0, 52.0], [5.0, 5.0] if cuda else None, rows)


def test_rows_nest_and_add_up():
    text = render(breakdown().to_dict())
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[1].startswith("| enc ") and "| · layers.0 " in lines[2]
    assert "| 30.0 " in lines[1] and "60.0%" in lines[1]
    assert "step 50.0 ms (median 50.0 [49.0, 51.0])" in text
    assert "GPU clock" not in text and "Memory" not in text


def test_cuda_table_when_measured():
    assert "GPU clock (CUDA events on the current stream; step 5.00 ms)" in render(breakdown(True).to_dict())


def test_memory_table_when_measured():
    b = breakdown()
    b.add_memory({"enc": {"params_bytes": 2_000_000, "output_bytes": 1_000_000}}, {"Parameter": 2_000_000,
                                                                                    "Total": 3_000_000})
    text = render(b.to_dict())
    assert "| enc      | 2.000       | 1.000       | n/a" in text and "Step peak 3.000 MB: parameter 2.000 MB." in text
