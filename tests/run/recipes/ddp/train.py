#!/usr/bin/env python3
"""The brain recipe of these tests made ready for torchrun, as SpeechBrain asks: ``ddp_init_group`` before the
Brain (the model has no BatchNorm, which gloo's SyncBatchNorm conversion would refuse on the CPU).

    torchrun --nproc_per_node=2 train.py ../brain/hparams.yaml --output_folder out --distributed_backend gloo
"""
import os
import sys

import speechbrain as sb
from hyperpyyaml import load_hyperpyyaml

BRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "brain")
sys.path.insert(0, BRAIN)
from train import ToyBrain, dataset  # noqa: E402

if __name__ == "__main__":
    hparams_file, run_opts, overrides = sb.parse_arguments(sys.argv[1:])
    sb.utils.distributed.ddp_init_group(run_opts)
    with open(hparams_file) as f:
        hparams = load_hyperpyyaml(f, overrides)
    sb.create_experiment_directory(hparams["output_folder"], hyperparams_to_save=hparams_file, overrides=overrides)
    train = dataset(os.path.join(BRAIN, hparams["manifest"]), hparams)
    brain = ToyBrain(hparams["modules"], hparams["opt_class"], hparams, run_opts, hparams["checkpointer"])
    loader = {"batch_size": hparams["batch_size"]}
    brain.fit(hparams["epoch_counter"], train, train, train_loader_kwargs=loader, valid_loader_kwargs=loader)
    brain.evaluate(train, test_loader_kwargs=loader)
