"""Small stream-job configurations for the tests (one CPU thread, the fake model unless told otherwise)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

FAKE = "helpers.fake_streaming.FakeStreamingASR"


def write_stream_yaml(path: Path, source: str, *, type_name: str = FAKE, chunk_sizes: Any = (8,),
                      left_context_chunks: Any = (2,), streams: Any = (1,), audio: Optional[str] = None,
                      audio_s: Optional[float] = 1.0, capacity: Any = None, offline: bool = False, warmup: int = 1,
                      measured: int = 1, traffic: Optional[str] = None, alignment: Any = None,
                      output_folder: Optional[Path] = None) -> Path:
    """A stream.yaml for tests: one CPU setting with one thread, one run per cell, noise unless ``audio``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    streaming = {"chunk_sizes": list(chunk_sizes), "left_context_chunks": list(left_context_chunks),
                 "streams": list(streams), "audio": audio, "audio_s": audio_s}
    if traffic is not None:
        streaming["traffic"] = traffic
    if alignment is not None:
        streaming["alignment"] = alignment
    tree = {
        "model": {"source": source, "type": type_name}, "streaming": streaming,
        "capacity": capacity, "offline": offline, "devices": "cpu", "cpu_threads": 1, "warmup": warmup,
        "measured": measured, "repeats": {"runs": 1}, "seed": 0,
        "output_folder": str(output_folder or path.parent / "out"),
    }
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in tree.items()))
    return path
