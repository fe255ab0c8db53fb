"""One rank of the training recipe under torchrun: SpeechBrain's DDP path, profiled by the one decorator.

``torchrun --nproc_per_node=N -m sbprof train train_profile.yaml``: every
rank runs ``sbprof train``, whose command line hands over to
:func:`run_rank` (each variant and scaling in turn); rank 0 merges the rank
files at the end, after a barrier with a timeout, into
``<output_folder>/ranks/<run id>/report.md``. A ``world_sizes`` study starts
its worlds with the same command (:mod:`sbprof.train.world_worker`: one
variant and scaling per world, ``$SBPROF_NO_MERGE=1``: the job's own report
merges every world).

Each rank does what a SpeechBrain recipe does under torchrun:
``ddp_init_group(run_opts)``, then a ``Brain`` whose modules SpeechBrain
wraps in DDP (gloo on the CPU, NCCL on ``cuda:<local rank>``); its batches
are this rank's share of each global batch. The models hold no BatchNorm
(SpeechBrain converts BatchNorm to SyncBatchNorm, which fails on CPU
modules). The only profiling change is one decorator,
``profile(brain, activities=[CPU], schedule=schedule(wait=0, warmup=W, active=M))``:
its rank mode writes this rank's file (step times, communication from the
profiler's events, seconds between steps), then the job adds each step's
utterances and audio seconds and the memory of one more step on the longest
batch (the process's resident peak, or the CUDA allocator's).
"""
from __future__ import annotations

import functools
from pathlib import Path

import torch

from sbprof.distributed.world import World, from_env
from sbprof.base.errors import ConfigError
from sbprof.train.config import TrainConfig

RANKS_DIR = "ranks"
"""Under the output folder: one folder per run, holding its rank files (and traces)."""


def rank_device(cfg: TrainConfig, world: World) -> str:
    """``cpu``, or this rank's GPU: ``cuda:<local rank>`` (one GPU per rank)."""
    return "cpu" if cfg.preamble.devices[0] == "cpu" else f"cuda:{world.local_rank}"


def section_key(variant: str, scaling: str) -> str:
    """How a training cell is named in rank files and merged reports: ``ctc-strong``."""
    return f"{variant}-{scaling}"


def train_rank(cfg: TrainConfig, world: World, variant: str, scaling: str, run_opts: dict) -> None:
    """Train one variant on this rank's share of the batches, profiled (see the module docstring)."""
    from torch.utils.data import DataLoader

    from sbprof.decorators import export, profile, schedule
    from sbprof.train.brains import BRAINS
    from sbprof.train.data import mock_batches
    from sbprof.train.models import build_modules
    from sbprof.train.worker import step_peak

    pre, data_cfg, device = cfg.preamble, cfg.data, run_opts["device"]
    per_rank = cfg.rank_batch(scaling, world.world_size)
    data = mock_batches(data_cfg.num_batches, per_rank * world.world_size, data_cfg.scale, data_cfg.sample_rate,
                        cfg.model.vocab_size, pre.seed, world_size=world.world_size, rank=world.rank)
    torch.manual_seed(pre.seed)
    modules = build_modules(variant, cfg.model, data_cfg.sample_rate, pre.seed)
    order = [i % len(data.batches) for i in range(pre.warmup + pre.measured)]
    brain = BRAINS[variant](modules, functools.partial(torch.optim.Adam, lr=cfg.learning_rate), run_opts=run_opts)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    brain = profile(brain, activities=activities, schedule=schedule(wait=0, warmup=pre.warmup, active=pre.measured),
                    on_trace_ready=export() if cfg.profiling.export_trace else None,
                    rank_folder=str(Path(pre.output_folder) / RANKS_DIR))
    section = brain.profiler.rank_section
    section.key = section_key(variant, scaling)
    section.cell = {"model": variant, "batch_size": per_rank, "params": {"scaling": scaling},
                    "input": f"librispeech-like:seed={pre.seed},scale={data_cfg.scale:g}"}
    section.step_figures = {"utterances_per_step": [float(per_rank)] * len(order),
                            "audio_s_per_step": [data.audio_s[i] for i in order]}
    brain.fit(range(1), DataLoader([data.batches[i] for i in order], batch_size=None))
    longest = max(range(len(data.batches)), key=data.audio_s.__getitem__)
    section.memory = step_peak(brain, data.batches[longest], device)  # every rank steps once more (DDP)


def run_rank(cfg: TrainConfig) -> int:
    """This process's rank: every (variant, scaling) of ``cfg``, then the end barrier.

    Returns the exit code: on rank 0, ``sbprof merge``'s (1 when the run is incomplete; no merge with
    ``$SBPROF_NO_MERGE=1``); else 0.
    """
    from speechbrain.utils.distributed import ddp_init_group

    from sbprof.distributed.ranklog import finish
    from sbprof.workers.cells import set_threads

    world = from_env()
    if world is None:
        raise ConfigError("run_rank runs under torchrun ($RANK and $WORLD_SIZE unset)")
    device = rank_device(cfg, world)
    set_threads(cfg.preamble.cpu_threads[0] if device == "cpu" else cfg.preamble.cuda_threads)
    run_opts = {"device": device, "distributed_backend": "gloo" if device == "cpu" else "nccl",
                "noprogressbar": True, "precision": cfg.precision}
    ddp_init_group(run_opts)  # SpeechBrain's own way into torch.distributed (env:// from torchrun)
    try:
        for variant in cfg.variants:
            for scaling in cfg.scaling:
                train_rank(cfg, world, variant, scaling, run_opts)
        code = finish("done")
    finally:
        torch.distributed.destroy_process_group()
    return code or 0
