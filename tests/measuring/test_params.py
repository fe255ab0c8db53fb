"""count_params against hand-computed sizes and torch's own de-duplicated parameter list."""
from __future__ import annotations

import json

import pytest
import torch

from sbprof.base.errors import ConfigError
from sbprof.measuring.params import count_params


class TinyASR(torch.nn.Module):
    """Encoder (conv + GRU), CTC head, and a decoder whose output layer is tied to its embedding."""

    def __init__(self, feats=20, hidden=16, vocab=30):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Conv1d(feats, hidden, 3), torch.nn.BatchNorm1d(hidden))
        self.rnn = torch.nn.GRU(hidden, hidden, batch_first=True)
        self.ctc_head = torch.nn.Linear(hidden, vocab)
        self.decoder = torch.nn.ModuleDict({"emb": torch.nn.Embedding(vocab, hidden),
                                            "out": torch.nn.Linear(hidden, vocab)})
        self.decoder["out"].weight = self.decoder["emb"].weight


def test_tied_weights_counted_once_and_flagged():
    model = TinyASR()
    c = count_params(model)
    feats, hidden, vocab = 20, 16, 30
    conv, bn = hidden * feats * 3 + hidden, 2 * hidden
    gru = 3 * (hidden * hidden + hidden * hidden + 2 * hidden)
    ctc, decoder = hidden * vocab + vocab, vocab * hidden + vocab
    assert c.total == conv + bn + gru + ctc + decoder
    assert c.total == sum(p.numel() for p in model.parameters())  # torch's own de-duplication
    assert c.total < sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert [(s.names, s.numel) for s in c.shared] == [(("decoder.emb.weight", "decoder.out.weight"), vocab * hidden)]
    rows = {r.name: r for r in c.modules}
    assert (rows["encoder"].total, rows["rnn"].total, rows["ctc_head"].total) == (conv + bn, gru, ctc)
    assert rows["decoder"].total == decoder and rows["decoder"].shared and not rows["ctc_head"].shared
    assert rows["decoder.out"].total == vocab * hidden + vocab and rows["decoder.out"].own == vocab * hidden + vocab
    assert (rows[""].depth, rows["encoder.0"].depth, rows[""].own) == (0, 2, 0)


def test_trainable_and_bytes_per_dtype():
    model = TinyASR()
    model.encoder.requires_grad_(False)
    model.ctc_head.half()
    c = count_params(model)
    frozen = sum(p.numel() for p in model.encoder.parameters())
    assert (c.trainable, c.frozen) == (c.total - frozen, frozen)
    half = sum(p.numel() for p in model.ctc_head.parameters())
    assert c.bytes_by_dtype == {"float16": 2 * half, "float32": 4 * (c.total - half)}
    # BatchNorm buffers: running mean and variance (float32), batch counter (int64)
    assert c.buffers == 2 * 16 + 1 and c.buffer_bytes_by_dtype == {"float32": 2 * 16 * 4, "int64": 8}
    assert json.loads(json.dumps(c.to_dict()))["bytes"] == c.bytes


def test_speechbrain_conformer_rows_match_hand_count():
    conformer = pytest.importorskip("speechbrain.lobes.models.transformer.Conformer")
    model = conformer.ConformerEncoder(num_layers=2, d_model=32, d_ffn=64, nhead=4, kernel_size=7,
                                       attention_type="regularMHA")
    c = count_params(model)
    d = 32
    attention = 3 * d * d + 3 * d + d * d + d  # packed in-projection, out-projection
    assert c.module("layers.0.mha_layer").total == attention
    assert c.total == sum(p.numel() for p in model.parameters())
    assert c.module("").total == sum(c.module(f"layers.{i}").total for i in range(2)) + c.module("norm").total


def test_errors():
    with pytest.raises(ConfigError, match="nn.Module"):
        count_params("model")
    with pytest.raises(ConfigError, match="lazy"):
        count_params(torch.nn.LazyLinear(4))
    with pytest.raises(ConfigError, match="no module named"):
        count_params(torch.nn.Linear(2, 2)).module("encoder")
