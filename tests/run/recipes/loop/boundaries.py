"""A plain PyTorch loop that crosses its process's boundaries, for the tests of sbprof run:

    python boundaries.py --steps 150 --fill_at 20 --fill_folder /mnt/small   # fills that disk at step 20
    python boundaries.py --steps 3 --fork child_exit --hard_exit 5           # forks, then os._exit(5)

``--fork``: after the steps, the process forks; the child takes 2 more steps and then returns from the script
(``returns``), calls ``sys.exit(7)`` (``child_exit``) or raises (``raises``); the parent waits for it, prints
the child's status and ends, by ``os._exit(N)`` with ``--hard_exit N``.
"""
import argparse
import os
import sys

import torch


def fill(folder):
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        print(f"disk filled: {exc.strerror}")
    finally:
        os.close(fd)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fill_at", type=int, default=None)
    parser.add_argument("--fill_folder", default=None)
    parser.add_argument("--fork", choices=["returns", "child_exit", "raises"], default=None)
    parser.add_argument("--hard_exit", type=int, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for i in range(args.steps):
        if i == args.fill_at:
            fill(args.fill_folder)
        step()
    if args.fork is not None:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            step()
            step()
            print(f"child {os.getpid()} took 2 steps")
            if args.fork == "child_exit":
                sys.exit(7)
            if args.fork == "raises":
                raise RuntimeError("the child's own error")
            return
        _, status = os.waitpid(pid, 0)
        print(f"child status {os.waitstatus_to_exitcode(status)}")
    print(f"parent {os.getpid()} took {args.steps} steps")
    if args.hard_exit is not None:
        sys.stdout.flush()
        os._exit(args.hard_exit)


if __name__ == "__main__":
    main()
