#!/usr/bin/env python3
"""A tiny SpeechBrain recipe for the tests of sbprof run: fit (train and valid), then evaluate, with a checkpointer.

The signals are made from the manifest (seeded noise of the listed duration), so no audio file is needed.
With ``timed: True`` the Brain overrides ``fit_batch`` and appends each call's perf_counter time to
``<output_folder>/fit_batch_s.txt`` (the tests' outside clock; on a GPU also the CUDA events' time around it, to
``fit_batch_cuda_s.txt``); every training loss goes to ``losses.txt``.

    python train.py hparams.yaml --output_folder out [--timed True] [--number_of_epochs 2]
"""
import os
import sys
import time

import speechbrain as sb
import torch
from hyperpyyaml import load_hyperpyyaml


class ToyBrain(sb.Brain):
    def compute_forward(self, batch, stage):
        wavs, lens = batch.sig
        frames = wavs[:, : wavs.shape[1] // 160 * 160].reshape(wavs.shape[0], -1, 160)
        return self.modules.model(frames).mean(dim=1)

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.cross_entropy(predictions, batch.label.data[:, 0])

    def fit_batch(self, batch):
        loss = super().fit_batch(batch)
        with open(self.hparams.output_folder + "/losses.txt", "a") as f:
            f.write(f"{loss.item()!r}\n")
        return loss

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == sb.Stage.VALID:
            self.checkpointer.save_and_keep_only(meta={"loss": stage_loss}, min_keys=["loss"])


class TimedBrain(ToyBrain):
    """Overrides fit_batch: the test's own clock around each call (and, on a GPU, CUDA events around it too)."""

    def fit_batch(self, batch):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if str(self.device).startswith("cuda") \
            else None
        if events:
            events[0].record()
        start = time.perf_counter()
        loss = super().fit_batch(batch)
        with open(self.hparams.output_folder + "/fit_batch_s.txt", "a") as f:
            f.write(f"{time.perf_counter() - start!r}\n")
        if events:
            events[1].record()
            events[1].synchronize()
            with open(self.hparams.output_folder + "/fit_batch_cuda_s.txt", "a") as f:
                f.write(f"{events[0].elapsed_time(events[1]) / 1e3!r}\n")
        return loss


def dataset(manifest, hparams):
    data = sb.dataio.dataset.DynamicItemDataset.from_json(manifest)

    @sb.utils.data_pipeline.takes("duration", "seed")
    @sb.utils.data_pipeline.provides("sig")
    def signal(duration, seed):
        return torch.randn(int(duration * hparams["sample_rate"]), generator=torch.Generator().manual_seed(seed))

    @sb.utils.data_pipeline.takes("class")
    @sb.utils.data_pipeline.provides("label")
    def label(value):
        return torch.tensor([value])

    sb.dataio.dataset.add_dynamic_item([data], signal)
    sb.dataio.dataset.add_dynamic_item([data], label)
    sb.dataio.dataset.set_output_keys([data], ["id", "sig", "label"])
    return data


if __name__ == "__main__":
    hparams_file, run_opts, overrides = sb.parse_arguments(sys.argv[1:])
    with open(hparams_file) as f:
        hparams = load_hyperpyyaml(f, overrides)
    sb.create_experiment_directory(hparams["output_folder"], hyperparams_to_save=hparams_file, overrides=overrides)
    train = dataset(os.path.join(os.path.dirname(os.path.abspath(hparams_file)), hparams["manifest"]), hparams)
    brain_class = TimedBrain if hparams["timed"] else ToyBrain
    brain = brain_class(hparams["modules"], hparams["opt_class"], hparams, run_opts, hparams["checkpointer"])
    loader = {"batch_size": hparams["batch_size"]}
    brain.fit(hparams["epoch_counter"], train, train, train_loader_kwargs=loader, valid_loader_kwargs=loader)
    brain.evaluate(train, test_loader_kwargs=loader)
    print("recipe finished")
