"""Models with known costs for the attribution tests: sleeps of known length in forward and backward."""
import time

import torch


SLEPT = {"forward": [], "backward": []}
"""How long each sleep of :class:`SleepFn` lasted by an outside clock (a busy machine wakes sleepers late)."""


def _sleep(seconds, phase):
    t0 = time.perf_counter()
    time.sleep(seconds)
    SLEPT[phase].append(time.perf_counter() - t0)


class SleepFn(torch.autograd.Function):
    """Identity that sleeps a known time in forward and in backward (each sleep's length kept in ``SLEPT``)."""

    @staticmethod
    def forward(ctx, x, forward_s, backward_s):
        _sleep(forward_s, "forward")
        ctx.backward_s = backward_s
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _sleep(ctx.backward_s, "backward")
        return grad, None, None


class Sleeper(torch.nn.Module):
    """Runs ``inner`` then sleeps on its (first) output: the sleep belongs to this module."""

    def __init__(self, inner, forward_s, backward_s):
        super().__init__()
        self.inner = inner
        self.forward_s = forward_s
        self.backward_s = backward_s

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        if isinstance(out, tuple):
            return (SleepFn.apply(out[0], self.forward_s, self.backward_s),) + out[1:]
        return SleepFn.apply(out, self.forward_s, self.backward_s)


class Chain(torch.nn.Module):
    """a -> (sleep in code between modules, in the parent's own forward and backward) -> b."""

    def __init__(self, between_s):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.between_s = between_s

    def forward(self, x):
        return self.b(SleepFn.apply(self.a(x), self.between_s, self.between_s))


def torchaudio_conformer(layers=2):
    import torchaudio

    torch.manual_seed(0)
    return torchaudio.models.Conformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=layers,
                                       depthwise_conv_kernel_size=7)


def speechbrain_conformer(layers=2):
    from speechbrain.lobes.models.transformer.Conformer import ConformerEncoder

    torch.manual_seed(0)
    # Used bare, without TransformerASR's positional embeddings: regular multi-head attention.
    return ConformerEncoder(num_layers=layers, d_model=32, d_ffn=64, nhead=4, kernel_size=7,
                            attention_type="regularMHA")


def run_conformer(model, x):
    """Forward of either Conformer; returns the encoded tensor."""
    if hasattr(model, "conformer_layers"):
        out, _ = model(x, torch.full((x.shape[0],), x.shape[1]))
        return out
    out, _ = model(x)
    return out
