"""The small speech models the training recipe trains, built from SpeechBrain's own layers.

Both variants share the front of SpeechBrain's LibriSpeech Conformer recipes:
filterbank features, per-utterance normalisation, a CNN front end that
subsamples time 4x, and a Conformer encoder inside ``TransformerASR``
(relative positional multi-head attention, pre-norm). Then:

- ``ctc``: a linear CTC head, log-softmax, ``torch.nn.CTCLoss``;
- ``transducer``: a prediction network (embedding + LSTM), projections of
  both streams, SpeechBrain's ``Transducer_joint`` and a linear output, and
  torchaudio's ``RNNTLoss`` (``rnnt_loss``).

The losses are modules so that the per-module breakdown gives them rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
from sbprof.record.codec import Codec

VARIANTS = ("ctc", "transducer")


@dataclass(frozen=True)
class ModelSizes(Codec):
    """Model hyperparameters (``model`` in the YAML)."""

    n_mels: int = 80
    d_model: int = 144
    num_layers: int = 4
    nhead: int = 4
    d_ffn: int = 576
    kernel_size: int = 31
    vocab_size: int = 500
    embedding_dim: int = 128
    predictor_dim: int = 320
    joint_dim: int = 320


def _front_end(sizes: ModelSizes, sample_rate: int) -> Dict[str, torch.nn.Module]:
    from speechbrain.lobes.features import Fbank
    from speechbrain.lobes.models.convolution import ConvolutionFrontEnd
    from speechbrain.lobes.models.transformer.TransformerASR import EncoderWrapper, TransformerASR
    from speechbrain.processing.features import InputNormalization

    cnn = ConvolutionFrontEnd(input_shape=(None, None, sizes.n_mels), num_blocks=2, num_layers_per_block=1,
                              out_channels=(64, 32), kernel_sizes=(3, 3), strides=(2, 2), residuals=(False, False))
    with torch.no_grad():
        out = cnn(torch.zeros(1, 16, sizes.n_mels))
    transformer = TransformerASR(
        input_size=out.shape[2] * out.shape[3], tgt_vocab=sizes.vocab_size, d_model=sizes.d_model,
        nhead=sizes.nhead, num_encoder_layers=sizes.num_layers, num_decoder_layers=0, d_ffn=sizes.d_ffn,
        dropout=0.1, kernel_size=sizes.kernel_size, encoder_module="conformer", attention_type="RelPosMHAXL",
        normalize_before=True, causal=False)
    return {"compute_features": Fbank(sample_rate=sample_rate, n_fft=400, n_mels=sizes.n_mels),
            "normalize": InputNormalization(norm_type="sentence"), "CNN": cnn, "enc": EncoderWrapper(transformer)}


def build_modules(variant: str, sizes: ModelSizes, sample_rate: int, seed: int) -> Dict[str, torch.nn.Module]:
    """The modules of one variant, initialised from ``seed``.

    Example
    -------
    >>> modules = build_modules("ctc", ModelSizes(n_mels=20, d_model=16, num_layers=1, nhead=2, d_ffn=32,
    ...                                           kernel_size=3, vocab_size=10), 16000, seed=1)
    >>> list(modules)
    ['compute_features', 'normalize', 'CNN', 'enc', 'ctc_lin', 'log_softmax', 'ctc_loss']
    """
    from speechbrain.nnet.activations import Softmax
    from speechbrain.nnet.linear import Linear

    torch.manual_seed(seed)
    modules = _front_end(sizes, sample_rate)
    if variant == "ctc":
        modules.update(ctc_lin=Linear(input_size=sizes.d_model, n_neurons=sizes.vocab_size),
                       log_softmax=Softmax(apply_log=True), ctc_loss=torch.nn.CTCLoss(blank=0, zero_infinity=True))
        return modules
    if variant != "transducer":
        raise ValueError(f"unknown variant {variant!r}; known: {VARIANTS}")
    import torchaudio
    from speechbrain.nnet.embedding import Embedding
    from speechbrain.nnet.RNN import LSTM
    from speechbrain.nnet.transducer.transducer_joint import Transducer_joint

    modules.update(
        emb=Embedding(num_embeddings=sizes.vocab_size, embedding_dim=sizes.embedding_dim),
        dec=LSTM(input_shape=(None, None, sizes.embedding_dim), hidden_size=sizes.predictor_dim, num_layers=1),
        proj_enc=Linear(input_size=sizes.d_model, n_neurons=sizes.joint_dim),
        proj_dec=Linear(input_size=sizes.predictor_dim, n_neurons=sizes.joint_dim),
        Tjoint=Transducer_joint(joint="sum", nonlinearity=torch.nn.LeakyReLU),
        transducer_lin=Linear(input_size=sizes.joint_dim, n_neurons=sizes.vocab_size),
        rnnt_loss=torchaudio.transforms.RNNTLoss(blank=0, reduction="mean"))
    return modules
