"""Who this process is in a torchrun world, which run it belongs to, and where its rank file goes.

torchrun tells every process its place through the environment: ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (the node
rank) and ``MASTER_ADDR``/``MASTER_PORT`` (its key-value store). A run's
ranks must also agree on one name for the run, so that two runs never share
a folder: ``$SBPROF_RUN_ID`` when set (sbprof sets it when it starts the
ranks itself), otherwise the first proposal written into torchrun's own
store (``compare_set``: atomic, and no rank waits for another), otherwise
torchrun's ``TORCHELASTIC_RUN_ID`` (which is ``none`` for a static
multi-node rendezvous, hence the store first).

Rank files go to ``<folder>/<run id>/``; the folder is an argument, else
``$SBPROF_RANK_FOLDER``, else ``sbprof-ranks`` in the working directory.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec

ENV_FOLDER = "SBPROF_RANK_FOLDER"
ENV_RUN_ID = "SBPROF_RUN_ID"
DEFAULT_FOLDER = "sbprof-ranks"
STORE_PREFIX = "sbprof/"


@dataclass(frozen=True)
class World(Codec):
    """This process's place in a torchrun world (see the module docstring).

    Example
    -------
    >>> w = from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"})
    >>> w.rank, w.local_rank, w.node_rank, w.world_size
    (3, 1, 1, 4)
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    host: str
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    restart: int = 0
    elastic_run_id: Optional[str] = None


def _int(env: Mapping[str, str], name: str, default: Optional[int]) -> int:
    text = env.get(name)
    if text is None or text == "":
        if default is None:
            raise ConfigError(f"${name} is not set")
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"${name} must be an integer (torchrun sets it), got {text!r}") from None


def from_env(env: Optional[Mapping[str, str]] = None) -> Optional[World]:
    """The world torchrun describes in ``env`` (default ``os.environ``), or ``None`` outside one.

    A process is in a world when ``RANK`` and ``WORLD_SIZE`` are both set.

    Example
    -------
    >>> from_env({}) is None
    True
    >>> from_env({"RANK": "2", "WORLD_SIZE": "2"})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: $RANK is 2, outside a world of size 2 (ranks 0 to 1)
    """
    env = os.environ if env is None else env
    if env.get("RANK") is None or env.get("WORLD_SIZE") is None:
        return None
    rank, size = _int(env, "RANK", None), _int(env, "WORLD_SIZE", None)
    if size < 1 or not 0 <= rank < size:
        raise ConfigError(f"$RANK is {rank}, outside a world of size {size} (ranks 0 to {size - 1})")
    port = env.get("MASTER_PORT")
    return World(rank=rank, local_rank=_int(env, "LOCAL_RANK", 0), world_size=size,
                 local_world_size=_int(env, "LOCAL_WORLD_SIZE", size), node_rank=_int(env, "GROUP_RANK", 0),
                 host=socket.gethostname(), master_addr=env.get("MASTER_ADDR"),
                 master_port=int(port) if port and port.isdigit() else None,
                 restart=_int(env, "TORCHELASTIC_RESTART_COUNT", 0), elastic_run_id=env.get("TORCHELASTIC_RUN_ID"))


def rank_folder(argument: Union[str, Path, None] = None) -> Path:
    """Where runs' rank files go: ``argument``, else ``$SBPROF_RANK_FOLDER``, else ``./sbprof-ranks`` (absolute).

    Example
    -------
    >>> rank_folder("/tmp/x").as_posix()
    '/tmp/x'
    """
    chosen = argument if argument not in (None, "") else os.environ.get(ENV_FOLDER) or DEFAULT_FOLDER
    return Path(os.path.abspath(os.path.expanduser(str(chosen))))


def connect_store(world: World, timeout_s: float = 30.0) -> Optional[Any]:
    """A client of torchrun's key-value store (``MASTER_ADDR:MASTER_PORT``), or ``None`` when none is reachable."""
    if world.master_addr is None or world.master_port is None:
        return None
    import datetime

    import torch.distributed as dist

    try:
        return dist.TCPStore(world.master_addr, world.master_port, is_master=False,
                             timeout=datetime.timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError, OSError):
        return None


def new_run_id() -> str:
    """A fresh run id that sorts by start time: ``20261125-140102-1a2b3c``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def agree_run_id(world: World, store: Optional[Any]) -> str:
    """One id for every rank of this run (see the module docstring); a restart of the run gets its own.

    Example
    -------
    >>> w = from_env({"RANK": "0", "WORLD_SIZE": "1", "TORCHELASTIC_RUN_ID": "job7"})
    >>> agree_run_id(w, None)
    'job7'
    """
    chosen = os.environ.get(ENV_RUN_ID)
    if not chosen and store is not None:
        key = f"{STORE_PREFIX}run_id/{world.restart}"
        try:
            chosen = store.compare_set(key, "", new_run_id()).decode()
        except (RuntimeError, ValueError, OSError):
            chosen = None
    if not chosen:
        if not world.elastic_run_id or world.elastic_run_id == "none":
            raise ConfigError("the ranks of this run cannot agree on a run id: torchrun's store is not reachable and "
                              f"TORCHELASTIC_RUN_ID is unset; set ${ENV_RUN_ID} to the same value on every rank")
        chosen = world.elastic_run_id
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in chosen)
    return safe if world.restart == 0 else f"{safe}-restart{world.restart}"


def backend() -> str:
    """The default process group's backend (``gloo``, ``nccl``...), or ``none`` before one exists."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return str(dist.get_backend())
    return "none"
