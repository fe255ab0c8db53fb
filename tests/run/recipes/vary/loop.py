"""A plain PyTorch loop for the tests of ``sbprof run --vary``, its costs known: each item sleeps ``--sleep_ms``
(data loading), each step naps ``--call_ms`` plus ``--utt_ms`` per utterance (a fixed cost per call and one per
utterance: sleeps, which load cannot stretch), batches are SpeechBrain ``PaddedBatch`` es of 0.1 s utterances.
``--overflow`` scales the input up by 1e5 and the output down by as much: the same loss in fp32, but past fp16's
largest value (65504) once autocast casts the input to fp16; ``--fail`` raises at the first step;
``--item_spin_ms``
and ``--spin_ms`` spin that much process CPU time in each item (in the DataLoader's worker when it has
workers) and in each step; ``--jitter_ms J`` adds a nap drawn from the system's entropy, uniform in [0, J] ms, to each step (a noisy variant,
the same in every seed).

    python loop.py --steps 10 --sleep_ms 20 --call_ms 20 --batch_size 1
"""
import argparse
import random
import time

import torch
from speechbrain.dataio.batch import PaddedBatch


def spin(ms):
    """Busy until this process has spent ``ms`` of CPU time."""
    start = time.process_time()
    while time.process_time() - start < ms / 1e3:
        pass


class Items(torch.utils.data.Dataset):
    def __init__(self, n, sleep_ms, spin_ms=0.0):
        self.n, self.sleep_ms, self.spin_ms = n, sleep_ms, spin_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_ms / 1e3)
        spin(self.spin_ms)
        g = torch.Generator().manual_seed(i)
        return {"sig": torch.randn(1600, generator=g), "target": torch.randn(1, generator=g)}


class Model(torch.nn.Module):
    def __init__(self, call_ms, utt_ms, scale, jitter_ms=0.0, spin_ms=0.0):
        super().__init__()
        self.call_ms, self.utt_ms, self.scale, self.jitter_ms, self.spin_ms = call_ms, utt_ms, scale, jitter_ms, spin_ms
        self.proj = torch.nn.Linear(1600, 1)

    def forward(self, x):
        jitter = random.SystemRandom().uniform(0, self.jitter_ms)
        time.sleep((self.call_ms + self.utt_ms * x.shape[0] + jitter) / 1e3)
        spin(self.spin_ms)
        return self.proj(x * self.scale) / self.scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--sleep_ms", type=float, default=0.0)
    parser.add_argument("--call_ms", type=float, default=0.0)
    parser.add_argument("--utt_ms", type=float, default=0.0)
    parser.add_argument("--item_spin_ms", type=float, default=0.0)
    parser.add_argument("--spin_ms", type=float, default=0.0)
    parser.add_argument("--jitter_ms", type=float, default=0.0)
    parser.add_argument("--overflow", action="store_true")
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    model = Model(args.call_ms, args.utt_ms, 1e5 if args.overflow else 1.0, args.jitter_ms, args.spin_ms)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    items = Items(args.steps * args.batch_size, args.sleep_ms, args.item_spin_ms)
    loader = torch.utils.data.DataLoader(items, batch_size=args.batch_size, collate_fn=PaddedBatch)
    for batch in loader:
        if args.fail:
            raise RuntimeError("the recipe's own error")
        out = model(batch.sig.data)
        loss = ((out - batch.target.data) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
