"""CUDA ground truths of the training recipe: each step's time against CUDA events its Brain records around the same
fit_batch call (median within 2 %; the decorator's clock encloses the call), and SpeechBrain's autocast precisions
(bf16, fp16) against fp32: the same first loss within each precision's rounding, the precision reported, time and
memory measured like any other run."""
from __future__ import annotations

import pytest

from benchmarks.gpu_truths import check, keep_report, medians, relative
from helpers.cuda import event_seconds, warm_cuda
from helpers.train_tiny import train_ctc
from sbprof.measuring.flops.peak import dominant_precision
from sbprof.record import Cell
from sbprof.train import brains
from sbprof.train.config import validate
from sbprof.train.data import mock_batches
from sbprof.train.models import build_modules
from sbprof.train.worker import measure_variant

pytestmark = pytest.mark.cuda

#: the first step's loss (same initial weights, same batch) under autocast against fp32: bf16 keeps 8 bits of
#: mantissa, fp16 11; the CTC loss itself runs in fp32 under autocast. Measured on the CPU in bf16: 0.04 % apart.
LOSS_REL = {"bf16": 0.05, "fp16": 0.02}


def test_train_step_time_against_cuda_events_around_each_fit_batch(tmp_path, monkeypatch):
    """The recipe's default model (a 4-layer Conformer, CTC) on the GPU, measured in this process by the worker's own
    function, with its Brain class swapped for one that records CUDA events around each fit_batch."""
    warm_cuda()
    seen = []

    class EventCTCBrain(brains.CTCBrain):
        def fit_batch(self, batch):
            loss, seconds = event_seconds(lambda: super(EventCTCBrain, self).fit_batch(batch))
            seen.append(seconds)
            return loss

    monkeypatch.setitem(brains.BRAINS, "ctc", EventCTCBrain)
    cfg = validate({"variants": ["ctc"], "devices": "cuda:0", "warmup": 2, "measured": 8,
                    "profiling": {"memory": False, "flops": False}, "output_folder": str(tmp_path)}, "gpu.yaml")
    data = mock_batches(cfg.data.num_batches, cfg.data.batch_size, cfg.data.scale, cfg.data.sample_rate,
                        cfg.model.vocab_size, cfg.preamble.seed)
    modules = build_modules("ctc", cfg.model, cfg.data.sample_rate, cfg.preamble.seed)
    m = measure_variant(cfg, Cell(model="ctc", device="cuda:0", threads=1), modules, data, tmp_path)
    events = seen[cfg.preamble.warmup:cfg.preamble.warmup + cfg.preamble.measured]  # the timed fit's measured steps
    assert len(m.wall_s) == len(events) == 8 and m.memory.peak_cuda_bytes > 0
    check(medians("train job: step time of a Conformer CTC Brain on CUDA", m.wall_s, events, 0.02, "s",
                  one_sided=True))


def test_autocast_bf16_and_fp16_report_their_precision_and_start_from_the_fp32_loss(tmp_path):
    fp32, _ = train_ctc(tmp_path / "fp32", "fp32", "cuda:0")
    assert dominant_precision(fp32.extra["flops"]["macs_by_precision"]) in ("fp32", "tf32")  # cuDNN convs: TF32
    for precision in ("bf16", "fp16"):
        record, report = train_ctc(tmp_path / precision, precision, "cuda:0")
        assert record.settings["precision"] == precision and f"{precision} (autocast" in report
        assert dominant_precision(record.extra["flops"]["macs_by_precision"]) == precision
        assert len(record.wall_s) == len(fp32.wall_s) and all(w > 0 for w in record.wall_s)
        assert record.memory.peak_cuda_bytes > 0 and "CUDA allocator peak" in report
        keep_report(f"train-{precision}-cuda", tmp_path / precision / "report.md")
        check(relative(f"train job, {precision} autocast: first step's loss against fp32's",
                       record.extra["loss_per_step"][0], fp32.extra["loss_per_step"][0], LOSS_REL[precision]))
