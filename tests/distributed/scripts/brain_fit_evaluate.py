"""Run under torchrun (gloo): a real SpeechBrain Brain, fit() then evaluate(), decorated with the README's one line.

Each rank times every ``fit_batch`` and ``evaluate_batch`` with its own ``perf_counter`` and ``process_time``
(inside sbprof's hook). Every utterance carries 0.5 s of audio (``sig``: 8,000 samples at the default 16 kHz).
``TEST_SPIN_S``: burn that much CPU time (process_time) in each training batch on rank ``TEST_SPIN_RANK`` (a
known straggler: its own work, whatever the machine's load does to its wall time).
``TEST_KILL_RANK``/``TEST_KILL_AT``: that rank kills itself with SIGKILL at the start of its training batch
KILL_AT (counting from 1), after sleeping ``TEST_KILL_DELAY_S``. ``TEST_RAISE_RANK``/``TEST_RAISE_AT``: that rank
raises at the start of that training batch (as a rank whose peer died does). ``TEST_ACTIVE``: the schedule's active
steps (default: the preset's).
"""
import json
import os
import signal
import sys
import time

import speechbrain as sb
import torch
from speechbrain.utils.distributed import ddp_init_group

import sbprof

SPIN_S = float(os.environ.get("TEST_SPIN_S", "0"))
SPIN_RANK = int(os.environ.get("TEST_SPIN_RANK", "1"))
KILL_RANK = int(os.environ.get("TEST_KILL_RANK", "-1"))
KILL_AT = int(os.environ.get("TEST_KILL_AT", "0"))
KILL_DELAY_S = float(os.environ.get("TEST_KILL_DELAY_S", "0"))
RAISE_RANK = int(os.environ.get("TEST_RAISE_RANK", "-1"))
RAISE_AT = int(os.environ.get("TEST_RAISE_AT", "0"))
ACTIVE = os.environ.get("TEST_ACTIVE")
RANK = int(os.environ["RANK"])
outside = {"train": [], "test": [], "train_cpu": [], "test_cpu": []}
AUDIO_SAMPLES = 8000


class Items(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = [{"id": str(i), "x": torch.randn(64, generator=g), "y": torch.randn(8, generator=g),
                       "sig": torch.zeros(AUDIO_SAMPLES)} for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class TinyBrain(sb.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch.x.data.to(self.device))

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch.y.data)

    def fit_batch(self, batch):
        start, cpu = time.perf_counter(), time.process_time()
        if RANK == KILL_RANK and len(outside["train"]) + 1 == KILL_AT:
            time.sleep(KILL_DELAY_S)
            os.kill(os.getpid(), signal.SIGKILL)
        if RANK == RAISE_RANK and len(outside["train"]) + 1 == RAISE_AT:
            raise RuntimeError("Connection closed by peer (raised by the test)")
        if RANK == SPIN_RANK and SPIN_S > 0:
            while time.process_time() - cpu < SPIN_S:
                pass
        loss = super().fit_batch(batch)
        outside["train"].append(time.perf_counter() - start)
        outside["train_cpu"].append(time.process_time() - cpu)
        return loss

    def evaluate_batch(self, batch, stage):
        start, cpu = time.perf_counter(), time.process_time()
        loss = super().evaluate_batch(batch, stage)
        outside["test"].append(time.perf_counter() - start)
        outside["test_cpu"].append(time.process_time() - cpu)
        return loss


run_opts = {"device": "cpu", "distributed_backend": "gloo"}
ddp_init_group(run_opts)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
brain = TinyBrain({"model": model}, lambda p: torch.optim.SGD(p, lr=0.01),
                  hparams={"output_folder": sys.argv[1]}, run_opts=run_opts)
brain = sbprof.profile_optimiser(brain, **({"wait": 0, "warmup": 1, "active": int(ACTIVE)} if ACTIVE else {}))
loader = {"batch_size": 4, "collate_fn": sb.dataio.batch.PaddedBatch}
brain.fit(range(1), Items(96, 1), None, train_loader_kwargs=loader)  # 12 batches of 4 per rank
brain.evaluate(Items(80, 2), test_loader_kwargs=loader)  # 10 batches of 4 per rank
with open(os.path.join(sys.argv[1], f"outside{RANK}.json"), "w") as f:
    json.dump(outside, f)
