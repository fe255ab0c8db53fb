"""Shape sources: frame arithmetic, CSV and lhotse manifests, shape files, the synthetic distribution."""
from __future__ import annotations

import math

import pytest
import torch

from sbprof.base.errors import ConfigError
from sbprof.models import utterances as synthetic
from sbprof.transducer.shapes import (
    frames_after_subsampling, load_shape_file, load_shapes, scale_shapes, shapes_from_csv, shapes_from_lhotse,
)

TEXTS = ["hello world", "a quick brown fox", "speech models are measured honestly here"]


def char_pieces(text: str) -> int:
    """Independent count for a sentencepiece *char* model: one piece per letter plus one word marker per word."""
    return len(text.replace(" ", "")) + len(text.split())


@pytest.fixture(scope="module")
def char_model(tmp_path_factory):
    spm = pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("spm")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 5) + "\n")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(folder / "char"), model_type="char",
                                   vocab_size=28, character_coverage=1.0, minloglevel=2)
    return folder / "char.model"


def test_frames_follow_two_stride_two_convolutions():
    # 12.34 s -> 1234 frames -> (1234 - 1) // 2 = 616 -> (616 - 1) // 2 = 307
    assert frames_after_subsampling(12.34) == 307
    assert frames_after_subsampling(12.34, subsampling=2) == 616
    assert frames_after_subsampling(1.0, frame_shift_s=0.02, subsampling=1) == 50
    with pytest.raises(ConfigError, match="power of two"):
        frames_after_subsampling(1.0, subsampling=3)


def test_csv_source_counts_frames_and_tokens(tmp_path, char_model):
    path = tmp_path / "utts.csv"
    path.write_text("duration,text\n" + "".join(f"{2.0 + i},{t}\n" for i, t in enumerate(TEXTS)))
    shapes = shapes_from_csv(path, char_model)
    assert shapes == [(frames_after_subsampling(2.0 + i), char_pieces(t)) for i, t in enumerate(TEXTS)]
    bad = tmp_path / "bad.csv"
    bad.write_text("seconds,text\n1.0,hi\n")
    with pytest.raises(ConfigError, match="duration"):
        shapes_from_csv(bad, char_model)


def test_lhotse_cuts_and_supervisions(tmp_path, char_model):
    lhotse = pytest.importorskip("lhotse")
    from lhotse.audio import AudioSource

    cuts, sups = [], []
    for i, text in enumerate(TEXTS):
        duration = 3.0 + i
        rec = lhotse.Recording(id=f"r{i}", sources=[AudioSource(type="file", channels=[0], source=f"r{i}.wav")],
                               sampling_rate=16000, num_samples=int(duration * 16000), duration=duration)
        sup = lhotse.SupervisionSegment(id=f"s{i}", recording_id=f"r{i}", start=0.0, duration=duration, text=text)
        sups.append(sup)
        cuts.append(lhotse.MonoCut(id=f"c{i}", start=0.0, duration=duration, channel=0, recording=rec,
                                   supervisions=[sup]))
    expected = [(frames_after_subsampling(3.0 + i), char_pieces(t)) for i, t in enumerate(TEXTS)]
    lhotse.CutSet.from_cuts(cuts).to_file(tmp_path / "cuts.jsonl.gz")
    lhotse.SupervisionSet.from_segments(sups).to_file(tmp_path / "sups.jsonl.gz")
    assert shapes_from_lhotse(tmp_path / "cuts.jsonl.gz", char_model) == expected
    assert shapes_from_lhotse(tmp_path / "sups.jsonl.gz", char_model) == expected
    lhotse.RecordingSet.from_recordings([c.recording for c in cuts]).to_file(tmp_path / "recs.jsonl.gz")
    with pytest.raises(ConfigError, match="RecordingSet"):
        shapes_from_lhotse(tmp_path / "recs.jsonl.gz", char_model)


def test_shape_files_csv_and_pt(tmp_path):
    (tmp_path / "s.csv").write_text("T,U\n10,2\n7,3\n")
    torch.save(torch.tensor([[10, 2], [7, 3]], dtype=torch.int32), tmp_path / "s.pt")
    assert load_shape_file(tmp_path / "s.csv") == load_shape_file(tmp_path / "s.pt") == [(10, 2), (7, 3)]
    (tmp_path / "x.csv").write_text("T,U\n10,abc\n")
    with pytest.raises(ConfigError, match="two integers"):
        load_shape_file(tmp_path / "x.csv")


def test_scaling_divides_and_keeps_at_least_one():
    assert scale_shapes([(343, 71), (3, 1)], 8) == [(43, 9), (1, 1)]
    assert load_shapes("synthetic", num_utterances=5, scale=2, seed=1) == scale_shapes(
        synthetic.sample_shapes(5, 1), 2)


def _quantile(xs, q):
    xs = sorted(xs)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def _pearson(xs, ys):
    return synthetic._pearson(xs, ys)


def test_synthetic_fit_is_reproducible():
    # The recorded coefficient is what the fit gives from the recorded figures.
    assert abs(synthetic.fit_copula_rho() - synthetic.COPULA_RHO) < 0.01


def test_synthetic_matches_the_real_librispeech_shapes(shared_dir):
    real = load_shape_file(shared_dir / "data" / "librispeech_train_clean_100_shape_info.csv")
    assert len(real) == 85617
    assert load_shape_file(shared_dir / "data" / "librispeech_train_clean_100_shape_info.pt") == real
    fake = synthetic.sample_shapes(len(real) // 4, seed=7)
    for column in (0, 1):
        r = [s[column] for s in real]
        f = [s[column] for s in fake]
        for q in (0.05, 0.25, 0.5, 0.75, 0.95):
            # Within 5 % of the real quantile (the fit interpolates between recorded quantiles).
            assert abs(_quantile(f, q) - _quantile(r, q)) <= 0.05 * _quantile(r, q), (column, q)
        assert abs(sum(f) / len(f) - sum(r) / len(r)) <= 0.03 * sum(r) / len(r)
    real_corr = _pearson([t for t, _ in real], [u for _, u in real])
    fake_corr = _pearson([t for t, _ in fake], [u for _, u in fake])
    assert real_corr > 0.5 and abs(fake_corr - real_corr) < 0.03
    # U grows with T: the median U of the longest quarter exceeds that of the shortest quarter by > 2x.
    by_t = sorted(fake)
    quarter = len(by_t) // 4
    assert _quantile([u for _, u in by_t[-quarter:]], 0.5) > 2 * _quantile([u for _, u in by_t[:quarter]], 0.5)
