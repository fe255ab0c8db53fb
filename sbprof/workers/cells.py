"""The worker side of every job: set up once, then one item (a cell) -> one record.

A job's worker module defines a :class:`CellWorker` subclass and ends with
``if __name__ == "__main__": sys.exit(serve_cells(MyWorker))``. The loop is
the same for every job: thread pools sized before any parallel work, the
setup (load the model, check the inputs), the ``loaded`` event, then per item
``start``, :meth:`CellWorker.measure`, ``result`` with the record, and
:meth:`CellWorker.release`. An item that raises becomes its record
(``oom`` or ``error`` with a one-line message) and the worker goes on; a
setup that fails ends the worker with a ``fatal`` event: bad input found only
now (``ConfigError``: the run stops, exit code 2) or a job that cannot be set
up (anything else: its items are recorded as errors). An item that raises
``ConfigError`` is bad input too: the run stops there.

Only the standard library, :mod:`sbprof.record` and :mod:`sbprof.base.errors`
(both pure) are imported at the top, so a worker can run under another
interpreter (an older torch for a backend that needs it).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Type

from sbprof.base.errors import ConfigError, failure_status
from sbprof.record import Cell, Measurement
from sbprof.workers.protocol import Channel, one_line, serve


class SetupError(Exception):
    """A worker could not set up (its message, one line, is what the run reports for the batch's items)."""


class CellWorker:
    """One worker process of a job (see the module docstring).

    Arguments
    ---------
    job : dict
        The batch's payload, its ``items`` (each ``{"cell", "label", ...}``) and
        ``indices`` (which of them this process does).
    """

    def __init__(self, job: Dict[str, Any]):
        self.job = job

    def setup(self) -> Dict[str, Any]:
        """Load what every item needs; return what the ``loaded`` event reports (e.g. the sample rate).

        Raise :class:`~sbprof.base.errors.ConfigError` for bad input found only now, :class:`SetupError` (or
        anything) when the batch cannot be done here. Under ``extra``, what the records of items whose worker
        later dies should still say (e.g. a check that passed).
        """
        return {}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        """One item's record, as a dict (a :class:`~sbprof.record.Measurement` or added figures)."""
        raise NotImplementedError

    def failed(self, item: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
        """The record of an item that raised (a batch that adds figures overrides this)."""
        from sbprof.measuring.env import collect_env

        return Measurement(label=item["label"], cell=Cell.from_dict(item["cell"]), status=failure_status(exc),
                           message=one_line(exc), settings=dict(item.get("settings", {})),
                           env=collect_env()).to_dict()

    def release(self) -> None:
        """Give back what one item left behind before the next (memory, caches)."""


def set_threads(threads: int) -> None:
    """Torch's intra- and inter-op pools; before any parallel work (the inter-op pool is sized only once)."""
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)


def run_cells(worker_class: Type[CellWorker]) -> Callable[[Dict[str, Any], Channel], int]:
    """The ``run(job, channel)`` that :func:`~sbprof.workers.protocol.serve` calls for ``worker_class``."""

    def run(job: Dict[str, Any], channel: Channel) -> int:
        if job.get("threads"):
            set_threads(int(job["threads"]))
        worker = worker_class(job)
        try:
            info = worker.setup()
        except ConfigError as exc:
            channel.fatal(str(exc), kind="config")
            return 2
        except SetupError as exc:
            channel.fatal(str(exc))
            return 3
        except Exception as exc:  # anything: the runner records this batch's items as errors with this line
            channel.fatal(one_line(exc))
            return 3
        channel.loaded(**info)
        for index in job["indices"]:
            channel.start(index)
            item = job["items"][index]
            try:
                record = worker.measure(item)
            except ConfigError as exc:  # bad input found only now: the run stops (its earlier records kept)
                channel.fatal(str(exc), kind="config")
                return 2
            except Exception as exc:  # recorded as the item's result; the worker goes on
                record = worker.failed(item, exc)
            channel.result(index, record)
            worker.release()
        return 0

    return run


def serve_cells(worker_class: Type[CellWorker]) -> int:
    """Entry point of a job's worker module (see the module docstring)."""
    return serve(run_cells(worker_class))
