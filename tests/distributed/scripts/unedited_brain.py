"""A SpeechBrain Brain as an unedited recipe has it: fit() then evaluate(), no ddp_init_group, no backend option.

Run as ``torchrun --nproc_per_node=2 -m sbprof run --ddp gloo unedited_brain.py OUT``. It registers its own DDP
communication hook (after SpeechBrain wraps the model), which times each bucket's all-reduce from the hook's call to
the completion of its future: per training batch, the union of those spans inside the batch is this script's
communication clock, written to ``OUT/outside<rank>.json`` with each batch's wall and CPU time.
``TEST_SPIN_CPU_S``: rank ``TEST_SPIN_RANK`` (default 1) burns that much CPU time (process_time) in each training
batch before the step: a known amount of its own work.
"""
import json
import os
import sys
import time

import speechbrain as sb
import torch
import torch.distributed as dist

SPIN_CPU_S = float(os.environ.get("TEST_SPIN_CPU_S", "0"))
SPIN_RANK = int(os.environ.get("TEST_SPIN_RANK", "1"))
RANK = int(os.environ["RANK"])
spans = []
outside = {"train_comm": [], "train": [], "train_cpu": []}


class Items(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = [{"id": str(i), "x": torch.randn(64, generator=g), "y": torch.randn(8, generator=g),
                       "sig": torch.zeros(8000)} for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def timed_allreduce(state, bucket):
    start = time.perf_counter()
    future = dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future()

    def done(f):
        spans.append((start, time.perf_counter()))
        return f.value()[0]
    return future.then(done)


def union_inside(t0, t1):
    total, end = 0.0, t0
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, t1)
        if b > a:
            total, end = total + b - a, b
    return total


class TinyBrain(sb.Brain):
    def on_fit_start(self):
        super().on_fit_start()  # SpeechBrain wraps the model in DDP here
        self.modules.model.register_comm_hook(None, timed_allreduce)

    def compute_forward(self, batch, stage):
        return self.modules.model(batch.x.data)

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch.y.data)

    def fit_batch(self, batch):
        start, cpu = time.perf_counter(), time.process_time()
        if RANK == SPIN_RANK and SPIN_CPU_S > 0:
            while time.process_time() - cpu < SPIN_CPU_S:
                pass
        loss = super().fit_batch(batch)
        end = time.perf_counter()
        outside["train"].append(end - start)
        outside["train_cpu"].append(time.process_time() - cpu)
        outside["train_comm"].append(union_inside(start, end))
        return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    brain = TinyBrain({"model": model}, lambda p: torch.optim.SGD(p, lr=0.01), hparams={"output_folder": sys.argv[1]},
                      run_opts={"device": "cpu"})
    loader = {"batch_size": 4, "collate_fn": sb.dataio.batch.PaddedBatch}
    try:
        brain.fit(range(1), Items(96, 1), Items(96, 3), train_loader_kwargs=loader, valid_loader_kwargs=loader)
        brain.evaluate(Items(80, 2), test_loader_kwargs=loader)
    finally:  # sbprof stops the script once evaluate's steps are recorded
        with open(os.path.join(sys.argv[1], f"outside{RANK}.json"), "w") as f:
            json.dump(outside, f)
