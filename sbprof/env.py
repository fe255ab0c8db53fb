"""What machine and which library versions a measurement was taken with."""
from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Optional

from sbprof.record import Env


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> Optional[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@functools.lru_cache(maxsize=None)
def collect_env() -> Env:
    """Describe this process's machine and libraries (cached: it does not change).

    Example
    -------
    >>> env = collect_env()
    >>> env.cpu_count >= 1 and env.torch != ""
    True
    """
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    return Env(
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count() or 1,
        torch=torch.__version__,
        torchaudio=_version("torchaudio"),
        speechbrain=_version("speechbrain"),
        cuda=cuda,
        gpu=torch.cuda.get_device_name() if cuda else None,
        sbprof=_version("sbprof"),
        git_commit=_git_commit(),
    )
