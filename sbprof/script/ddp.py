"""``sbprof run --ddp [gloo|nccl]``: an unedited SpeechBrain recipe under torchrun, its process group started by sbprof.

SpeechBrain runs under torchrun only when the script calls
``speechbrain.utils.distributed.ddp_init_group(run_opts)`` before it builds
its ``Brain``, with a ``distributed_backend`` in ``run_opts`` (otherwise
``Brain.__init__`` stops, and the Brain's default backend is ``nccl``). Its
own integration examples, like many scripts, parse no such option. With
``--ddp``, sbprof does for them what that call would, and nothing else:

1. before the script's first line, it starts the default process group as
   ``ddp_init_group`` does: ``torch.distributed.init_process_group(backend,
   rank=$RANK)`` (torchrun's ``env://`` rendezvous, torch's default timeout),
   and for NCCL first ``torch.cuda.set_device(cuda:$LOCAL_RANK)``;
2. a later ``init_process_group`` call of the script with the same backend,
   or none, returns at once, since the group is there; one asking for
   another backend raises a ``ValueError`` saying so. SpeechBrain's
   ``ddp_init_group`` returns at once too (it would otherwise first check its
   ``run_opts``' backend, ``nccl`` by default, against the GPUs);
3. every ``speechbrain.core.Brain`` built while the script runs gets
   ``distributed_backend`` = the ``--ddp`` backend in its ``run_opts``,
   unless the script's ``run_opts`` or hyperparameters set one.

It changes no data, model or option beyond these. SpeechBrain's DDP path then
does what it always does: ``DistributedSampler`` for the loaders, and every
trainable module converted to ``SyncBatchNorm`` and wrapped in DDP. On the CPU
(gloo) a module holding BatchNorm fails there ("SyncBatchNorm layers only work
with GPU modules"): that is SpeechBrain's limit, which ``--ddp`` does not lift.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Callable, List, Mapping, Optional

from sbprof.base.errors import ConfigError

BACKENDS = ("gloo", "nccl")
AUTO = "auto"
BACKEND_KEY = "distributed_backend"


def check_ddp(backend: Optional[str], env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The backend ``--ddp`` asks for, checked: under torchrun, a known backend, NCCL only with a GPU per local rank.

    Example
    -------
    >>> check_ddp(None) is None
    True
    >>> check_ddp("gloo", {})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --ddp starts the process group of a torchrun launch, but RANK and WORLD_SIZE are not set: run as torchrun --nproc_per_node=N -m sbprof run --ddp gloo SCRIPT.py ...
    """
    if backend is None:
        return None
    env = os.environ if env is None else env
    if backend == AUTO:  # a bare --ddp: NCCL where there is a GPU, gloo otherwise
        import torch

        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in BACKENDS:
        raise ConfigError(f"--ddp {backend}: unknown backend; give one of {', '.join(BACKENDS)}")
    if env.get("RANK") is None or env.get("WORLD_SIZE") is None:
        raise ConfigError("--ddp starts the process group of a torchrun launch, but RANK and WORLD_SIZE are not set: "
                          f"run as torchrun --nproc_per_node=N -m sbprof run --ddp {backend} SCRIPT.py ...")
    if backend == "nccl":
        import torch

        local = int(env.get("LOCAL_RANK") or 0)
        if torch.cuda.device_count() <= local:
            raise ConfigError(f"--ddp nccl needs a GPU per local rank: local rank {local}, "
                              f"{torch.cuda.device_count()} GPU(s) visible; use --ddp gloo on the CPU")
    return backend


class Ddp:
    """Steps 1-3 of the module docstring, installed by :meth:`install` and undone by :meth:`remove`."""

    def __init__(self, backend: str):
        self.backend = backend
        self._undo: List[Callable[[], None]] = []
        self.started = False  # sbprof started the group (not the script, nor someone before it)

    def install(self) -> "Ddp":
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            if self.backend == "nccl":
                torch.cuda.set_device(torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK') or 0)}"))
            dist.init_process_group(backend=self.backend, rank=int(os.environ["RANK"]))
            self.started = True
        self._patch(dist, "init_process_group", self._init_once(dist.init_process_group))
        from sbprof.script.hooks import when_imported

        self._undo.append(when_imported("speechbrain.utils.distributed", self._patch_init_group))
        self._undo.append(when_imported("speechbrain.core", self._patch_brain))
        return self

    def remove(self) -> None:
        """Undo the patches; the group sbprof started is destroyed (the ranks' files are closed by then)."""
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        import torch.distributed as dist

        if self.started and dist.is_initialized():
            dist.destroy_process_group()

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        original = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    def _init_once(self, init: Callable) -> Callable:
        ddp = self

        @functools.wraps(init)
        def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
            import torch.distributed as dist

            if not dist.is_initialized():
                return init(backend, *args, **kwargs)
            asked = str(backend).lower() if backend is not None else None
            if asked not in (None, ddp.backend):
                raise ValueError(f"sbprof run --ddp {ddp.backend} already started the process group, and the script "
                                 f"asks for backend {backend!r}: give --ddp {asked}, or leave --ddp out and let the "
                                 "script start its own group")
            return None
        return init_process_group

    def _patch_init_group(self, distributed: Any) -> None:
        init_group = distributed.ddp_init_group

        @functools.wraps(init_group)
        def ddp_init_group(run_opts: Any) -> None:
            import torch.distributed as dist

            return None if dist.is_initialized() else init_group(run_opts)
        self._patch(distributed, "ddp_init_group", ddp_init_group)

    def _patch_brain(self, core: Any) -> None:
        init = core.Brain.__init__
        backend = self.backend

        @functools.wraps(init)
        def brain_init(brain: Any, modules: Any = None, opt_class: Any = None, hparams: Any = None,
                       run_opts: Any = None, checkpointer: Any = None) -> None:
            init(brain, modules, opt_class, hparams, with_backend(run_opts, hparams, backend), checkpointer)
        self._patch(core.Brain, "__init__", brain_init)


def with_backend(run_opts: Any, hparams: Any, backend: str) -> Any:
    """``run_opts`` with ``distributed_backend`` set to ``backend``, unless ``run_opts`` (a dict or SpeechBrain's
    ``RunOptions``) or ``hparams`` already set one.

    Example
    -------
    >>> with_backend({"device": "cpu"}, None, "gloo")
    {'device': 'cpu', 'distributed_backend': 'gloo'}
    >>> with_backend({"distributed_backend": "nccl"}, None, "gloo")
    {'distributed_backend': 'nccl'}
    >>> with_backend(None, {"distributed_backend": "nccl"}, "gloo") is None
    True
    """
    if isinstance(hparams, Mapping) and BACKEND_KEY in hparams:
        return run_opts
    if run_opts is None:
        return {BACKEND_KEY: backend}
    if isinstance(run_opts, Mapping):
        return run_opts if BACKEND_KEY in run_opts else {**run_opts, BACKEND_KEY: backend}
    overridden = getattr(run_opts, "overridden_args", None)
    if dataclasses.is_dataclass(run_opts) and isinstance(overridden, set):  # SpeechBrain's RunOptions
        if BACKEND_KEY in overridden:
            return run_opts
        return dataclasses.replace(run_opts, **{BACKEND_KEY: backend, "overridden_args": overridden | {BACKEND_KEY}})
    return run_opts
