"""A plain PyTorch loop for the tests of sbprof run: a DataLoader whose items sleep a known time, a known pause
between ``__next__`` and the forward (``--between_ms``), a model with a module that spins (``--spin_ms``: CPU time)
or sleeps (``--nap_ms``) a known time in forward, and its own argparse flags. ``--thread`` runs the loop in a worker
thread that the main thread joins.

    python train.py --steps 8 --sleep_ms 20 --spin_ms 15 --losses losses.txt
"""
import argparse
import os
import signal
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "brain"))
from spin import Nap, Spin  # noqa: E402


class Sleepy(torch.utils.data.Dataset):
    """Each item sleeps ``sleep_ms``; with ``log``, each __getitem__'s own perf_counter time is appended there."""

    def __init__(self, n: int, sleep_ms: float, log=None):
        self.n, self.sleep_ms, self.log = n, sleep_ms, log

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        start = time.perf_counter()
        time.sleep(self.sleep_ms / 1e3)
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{time.perf_counter() - start!r}\n")
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), torch.randn(1, generator=g)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sleep_ms", type=float, default=0.0)
    parser.add_argument("--spin_ms", type=float, default=0.0)
    parser.add_argument("--nap_ms", type=float, default=0.0)
    parser.add_argument("--between_ms", type=float, default=0.0, help="sleep after __next__, before the forward")
    parser.add_argument("--thread", action="store_true", help="train in a worker thread")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--losses", default=None)
    parser.add_argument("--raise_at", type=int, default=None)
    parser.add_argument("--exit_at", type=int, default=None, help="sys.exit(3) at this step")
    parser.add_argument("--interrupt_at", type=int, default=None, help="send this process SIGINT at this step")
    parser.add_argument("--getitem_log", default=None)
    parser.add_argument("--warmup", type=int, default=0, help="the script's own flag, named like one of sbprof's")
    args = parser.parse_args()
    print(f"script args: {sorted(vars(args).items())}")
    if args.thread:
        worker = threading.Thread(target=train, args=(args,), name="trainer")
        worker.start()
        worker.join()
        print("the trainer thread ended")
    else:
        train(args)


def train(args):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), Spin(args.spin_ms), Nap(args.nap_ms),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Sleepy(args.steps, args.sleep_ms, args.getitem_log), batch_size=1,
                                         num_workers=args.workers)
    losses = []
    for step, (x, y) in enumerate(loader):
        if args.raise_at is not None and step == args.raise_at:
            raise RuntimeError(f"the recipe's own error at step {step}")
        if step == args.exit_at:
            sys.exit(3)
        if step == args.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(args.between_ms / 1e3)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if args.losses:
            with open(args.losses, "a") as f:
                f.write(f"{loss.item()!r}\n")
    print(f"trained {len(losses)} steps")
    print(f"speechbrain imported: {'speechbrain' in sys.modules}")


if __name__ == "__main__":
    main()
