"""Trace files for TensorBoard's profiler plugin and Perfetto, written one way everywhere."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

PathLike = Union[str, Path]


def trace_handler(dir_name: PathLike, worker_name: Optional[str] = None, use_gzip: bool = False) -> Callable[[Any], None]:
    """An ``on_trace_ready`` handler writing ``<worker>.<ns>.pt.trace.json`` files into ``dir_name``."""
    from torch.profiler import tensorboard_trace_handler

    return tensorboard_trace_handler(dir_name=str(dir_name), worker_name=worker_name, use_gzip=use_gzip)


def profile_to_trace(fn: Callable[[], Any], device: str, trace_dir: PathLike, name: str) -> Path:
    """Profile one call of ``fn`` (shapes and memory recorded) and return the trace file written.

    Example
    -------
    >>> import tempfile, torch
    >>> path = profile_to_trace(lambda: torch.ones(4).sum(), "cpu", tempfile.mkdtemp(), "demo")
    >>> path.name.startswith("demo.") and path.name.endswith(".pt.trace.json")
    True
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    trace_dir = Path(trace_dir)
    trace_dir.mkdir(parents=True, exist_ok=True)
    before = set(trace_dir.iterdir())
    with profile(activities=activities, record_shapes=True, profile_memory=True,
                 on_trace_ready=trace_handler(trace_dir, worker_name=name)):
        fn()
    written = sorted(set(trace_dir.iterdir()) - before)
    if not written:
        raise RuntimeError(f"torch.profiler wrote no trace into {trace_dir}")
    return written[-1]
