"""A plain PyTorch loop trained with LBFGS, a closure optimiser: each step calls its closure ``--max_iter`` times,
and each closure runs one bare ``nn.Linear(16, 16)`` ``--unroll`` times (many small operators a step: the case
whose trace grows fastest).

    python lbfgs.py --steps 12 --unroll 100 --max_iter 20
"""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--unroll", type=int, default=100)
    parser.add_argument("--max_iter", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    # No tolerance: every step evaluates its closure max_iter times, whatever the loss does.
    opt = torch.optim.LBFGS(model.parameters(), lr=0.01, max_iter=args.max_iter, tolerance_grad=0.0,
                            tolerance_change=0.0)
    x, y = torch.randn(8, 16), torch.randn(8, 16)

    def closure():
        opt.zero_grad()
        h = x
        for _ in range(args.unroll):
            h = torch.tanh(model(h))
        loss = ((h - y) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(args.steps):
        opt.step(closure)
    print(f"trained {args.steps} steps")


if __name__ == "__main__":
    main()
