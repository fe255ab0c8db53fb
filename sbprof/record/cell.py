"""Where a measurement sits: the typed coordinates every renderer groups and sorts by."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from sbprof.record.codec import Codec


def setting_name(device: str, threads: int) -> str:
    """A setting's filesystem-safe name (log, trace and plot files).

    Example
    -------
    >>> setting_name("cuda:0", 8)
    'cuda0-8threads'
    """
    return f"{device.replace(':', '')}-{threads}threads"


@dataclass(frozen=True)
class Cell(Codec):
    """The coordinates of one measurement in its run.

    Arguments
    ---------
    model : str
        The model, backend or module measured (a local model name, a folder,
        a transducer-loss backend...).
    variant : str, optional
        A variant of that model (e.g. hyperparameter overrides ``ctc_weight=0.3``).
    device : str
        ``cpu`` or ``cuda:N``.
    threads : int
        Torch intra-op threads of the measuring process.
    audio_s : float, optional
        Seconds of audio per utterance.
    batch_size : int, optional
        Utterances per batch.
    input : str
        What was fed (``random:seed=1234``, ``file:name.wav:sha256=...``).
    run : int
        Index of the fresh worker process that measured it (repeats of one cell).
    rank : int, optional
        Rank of the process in a distributed run.
    params : dict
        Coordinates particular to a job (e.g. a transducer batching mode).

    Example
    -------
    >>> c = Cell(model="encoder_asr", device="cpu", threads=1, audio_s=2.0, batch_size=4)
    >>> c.setting, c.grid_key
    (('cpu', 1), (2.0, 4))
    >>> Cell.from_dict(c.to_dict()) == c
    True
    """

    model: str = ""
    variant: Optional[str] = None
    device: str = "cpu"
    threads: int = 1
    audio_s: Optional[float] = None
    batch_size: Optional[int] = None
    input: str = ""
    run: int = 0
    rank: Optional[int] = None
    params: Dict[str, Any] = field(default_factory=dict, hash=False, compare=True)

    @property
    def setting(self) -> Tuple[str, int]:
        """The (device, threads) a worker process measures."""
        return (self.device, self.threads)

    @property
    def grid_key(self) -> Tuple[Optional[float], Optional[int]]:
        """The (audio seconds, batch size) position in a sweep's grid."""
        return (self.audio_s, self.batch_size)

    def key(self) -> Tuple[Any, ...]:
        """Identity of the cell in a results file (all coordinates)."""
        return (self.model, self.variant, self.device, self.threads, self.audio_s, self.batch_size, self.input,
                self.run, self.rank, tuple(sorted(self.params.items())))
