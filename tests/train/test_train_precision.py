"""The training recipe's ``precision`` (SpeechBrain's ``--precision``) on the CPU: a bf16 autocast run reports its
precision, trains from the same first loss as fp32 within bf16's rounding, and counts its products as bf16."""
import re

import pytest

from sbprof.base.errors import ConfigError
from sbprof.train.config import validate
from helpers.train_tiny import tiny_overrides, train_ctc

#: bf16 keeps 8 bits of mantissa (about 0.4 % per rounding): the first step's loss, same weights and batch, may
#: move by a few of those through the encoder; 5 % is generous for that and far below what a wrong model moves.
BF16_LOSS_REL = 0.05


def test_bf16_on_the_cpu_reports_its_precision_and_starts_from_the_fp32_loss(tmp_path):
    fp32, fp32_report = train_ctc(tmp_path / "fp32", "fp32")
    bf16, bf16_report = train_ctc(tmp_path / "bf16", "bf16")
    assert fp32.settings["precision"] == "fp32" and bf16.settings["precision"] == "bf16"
    assert "| precision " in fp32_report and "bf16 (autocast)" in bf16_report
    steps = fp32.warmup + len(fp32.wall_s)
    assert len(fp32.extra["loss_per_step"]) == len(bf16.extra["loss_per_step"]) == steps
    first32, first16 = fp32.extra["loss_per_step"][0], bf16.extra["loss_per_step"][0]
    assert first16 == pytest.approx(first32, rel=BF16_LOSS_REL) and first16 != first32  # autocast really ran
    # The FLOP count ran under the run's autocast: its products in bf16, the same products and MACs as in fp32.
    assert set(fp32.extra["flops"]["macs_by_precision"]) == {"fp32"}
    assert max(bf16.extra["flops"]["macs_by_precision"], key=bf16.extra["flops"]["macs_by_precision"].get) == "bf16"
    assert sum(bf16.extra["flops"]["macs_by_precision"].values()) == sum(fp32.extra["flops"]["macs_by_precision"]
                                                                           .values())
    assert "% bf16" in bf16_report and bf16.memory.peak_rss_bytes > 0 and len(bf16.wall_s) == len(fp32.wall_s)


@pytest.mark.parametrize("tree,message", [
    ({"precision": "fp16"}, "precision fp16 trains under CUDA autocast"),
    ({"precision": "bf61"}, "precision must be one of fp32, bf16, fp16, got 'bf61' (did you mean 'bf16'?)"),
    ({"precision": ["bf16", "fp32"]}, "precision must be one of"),
])
def test_a_precision_the_cpu_cannot_train_in_is_one_line(tmp_path, tree, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate({**tiny_overrides(tmp_path), **tree}, "tiny.yaml")
