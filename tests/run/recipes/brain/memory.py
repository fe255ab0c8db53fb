#!/usr/bin/env python3
"""A SpeechBrain recipe with one batch per epoch whose steps hold a known amount of memory: each training step
holds ``--train_bytes`` and each validation or test step ``--eval_bytes``, half in many 64 KiB tensors (heap-sized:
freed ones stay with the allocator unless handed back) and half in one large tensor, all alive together until the
step's loss is computed. Fit (train and valid: one batch each per epoch), then evaluate on a test set of
``--test_batches`` batches. With ``--second_brain`` a second Brain is fitted after the first, before the evaluation
(as SpeechBrain's sampling example runs several).

    python memory.py hparams.yaml --output_folder out --train_bytes 300000000 --eval_bytes 50000000
"""
import os
import sys

import speechbrain as sb
import torch
from hyperpyyaml import load_hyperpyyaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import ToyBrain, dataset  # noqa: E402

SMALL = 64 * 1024 // 4  # float32 elements of one 64 KiB tensor


def own_args(argv):
    """This recipe's flags, taken out of the arguments SpeechBrain parses."""
    values = {"--train_bytes": 300e6, "--eval_bytes": 50e6, "--test_batches": 2, "--second_brain": 0}
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] in values:
            values[argv[i]] = type(values[argv[i]])(float(argv[i + 1]))
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return values, rest


class MemoryBrain(ToyBrain):
    def compute_forward(self, batch, stage):
        nbytes = self.hparams.train_bytes if stage == sb.Stage.TRAIN else self.hparams.eval_bytes
        half = int(nbytes) // 2
        small = [torch.ones(SMALL) for _ in range(half // (4 * SMALL))]
        large = torch.ones(half // 4)
        self.held = (small, large)  # alive until the loss is computed
        return super().compute_forward(batch, stage)

    def compute_objectives(self, predictions, batch, stage):
        loss = super().compute_objectives(predictions, batch, stage)
        self.held = None
        return loss

    def fit_batch(self, batch):  # not ToyBrain's: no loss file
        return sb.Brain.fit_batch(self, batch)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        pass  # no checkpoint


if __name__ == "__main__":
    mine, argv = own_args(sys.argv[1:])
    hparams_file, run_opts, overrides = sb.parse_arguments(argv)
    with open(hparams_file) as f:
        hparams = load_hyperpyyaml(f, overrides)
    hparams.update(train_bytes=mine["--train_bytes"], eval_bytes=mine["--eval_bytes"])
    sb.create_experiment_directory(hparams["output_folder"])
    data = dataset(os.path.join(os.path.dirname(os.path.abspath(hparams_file)), hparams["manifest"]), hparams)
    one = data.filtered_sorted(select_n=1)
    test = data.filtered_sorted(select_n=mine["--test_batches"])
    loader = {"batch_size": 1}
    brain = MemoryBrain(hparams["modules"], hparams["opt_class"], hparams, run_opts)
    brain.fit(hparams["epoch_counter"], one, one, train_loader_kwargs=loader, valid_loader_kwargs=loader)
    if mine["--second_brain"]:
        second = MemoryBrain(hparams["modules"], hparams["opt_class"], hparams, run_opts)
        second.fit(range(1), one, one, train_loader_kwargs=loader, valid_loader_kwargs=loader)
    brain.evaluate(test, test_loader_kwargs=loader)
    print("recipe finished")
