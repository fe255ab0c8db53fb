"""A plain PyTorch loop whose forward either runs many tiny operators (``--ops N``: ``x = x + 1`` N times on a
1-element tensor) or one large matrix product (``--matmul N``: N x N by N x N).

    python tiny_ops.py --steps 9 --ops 10000 [--device cuda]
"""
import argparse

import torch


class Model(torch.nn.Module):
    def __init__(self, ops: int, matmul: int):
        super().__init__()
        self.ops = ops
        self.w = torch.nn.Parameter(torch.ones(max(matmul, 1), max(matmul, 1)))

    def forward(self, x):
        if self.ops:
            t = torch.zeros(1, device=self.w.device)
            for _ in range(self.ops):
                t = t + 1
            return (self.w * t).sum()
        return (x @ self.w).sum()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--ops", type=int, default=0)
    parser.add_argument("--matmul", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model(args.ops, args.matmul).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(max(args.matmul, 1), max(args.matmul, 1), device=args.device)
    for _ in range(args.steps):
        loss = model(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"trained {args.steps} steps")


if __name__ == "__main__":
    main()
