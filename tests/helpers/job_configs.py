"""A small, quick configuration of every registered job, as its command line (for the tests over every job)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

from helpers.fake_interfaces import write_model_folder, write_sweep_yaml
from helpers.fake_streaming import write_fake_model
from helpers.stream_configs import write_stream_yaml
from helpers.train_tiny import tiny_overrides
from sbprof import counts, script
from sbprof.registry import JOBS

COUNT_JOBS = tuple(job.name for job in counts.JOBS)
SCRIPT_JOBS = tuple(job.name for job in script.JOBS)
"""Jobs whose command line is a script to run (tested in tests/run)."""
YAML_JOBS = tuple(name for name, job in JOBS.items() if job.config_keys is not None)
"""Jobs run as ``sbprof JOB CONFIG.yaml``: every registered job but those with a command line of their own."""
BUSY = {"method": "process", "args": ["wavs", "wav_lens"]}


def _yaml(path: Path, tree: dict) -> Path:
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in tree.items()))
    return path


def argv_of(job: str, tmp_path: Path, out: Path, rtf: float = 0.05) -> List[str]:
    """The command line (after ``sbprof JOB``) of a small run of ``job`` writing into ``out``.

    The multi-cell jobs have several cells that each take a moment (``rtf`` for the busy models), so that a
    run can be killed between two of them.
    """
    if job == "profile":
        busy = write_model_folder(tmp_path / "busy", rtf=rtf)
        path = write_sweep_yaml(tmp_path / "p.yaml", str(busy), "helpers.fake_interfaces.BusyInterface", **BUSY,
                                lengths=[0.5, 1], batch_sizes=[1, 2], output_folder=out)
        return [str(path), "--noprogressbar"]
    if job == "compare-models":
        busy = write_model_folder(tmp_path / "busy", rtf=rtf)
        variants = [{"name": n, "source": str(busy), "type": "helpers.fake_interfaces.BusyInterface", **BUSY,
                     "overrides": {"rtf": r}} for n, r in (("a", rtf), ("b", 2 * rtf))]
        path = _yaml(tmp_path / "c.yaml", {"variants": variants, "vary": "audio_s", "values": [0.5, 1], "measured": 3,
                                          "warmup": 1, "devices": "cpu", "cpu_threads": 1, "output_folder": str(out)})
        return [str(path), "--noprogressbar"]
    if job == "train":
        tree = {**tiny_overrides(out), "profiling": {"memory": False}}
        return [str(_yaml(tmp_path / "t.yaml", tree)), "--noprogressbar"]
    if job == "transducer":
        tree = {"backends": ["reference", "torchaudio"], "shapes": {"num_utterances": 8, "scale": 16},
                "batching": {"batch_size": 2, "max_frames": 60}, "vocab_size": 30, "joiner_dim": 8, "warmup": 1,
                "measured": 3, "devices": "cpu", "cpu_threads": 1, "output_folder": str(out)}
        return [str(_yaml(tmp_path / "r.yaml", tree)), "--noprogressbar"]
    if job == "stream":  # two cells of about 0.5 s each (real-time pacing): a kill can land between them
        fake = write_fake_model(tmp_path / "fake", compute_s=rtf * 0.08)
        return [str(write_stream_yaml(tmp_path / "s.yaml", str(fake), chunk_sizes=[8, 16], audio_s=0.5,
                                      output_folder=out)), "--noprogressbar"]
    model = tmp_path / "m.yaml"
    model.write_text("model: !new:torch.nn.Sequential\n    - !new:torch.nn.Linear\n        in_features: 16\n"
                     "        out_features: 32\n    - !new:torch.nn.ReLU\n")
    shapes = [] if job == "params" else ["--input", "[4, 16]"]
    return [str(model), *shapes, "--output_folder", str(out)]


def expected_records(job: str) -> int:
    """How many records a complete run of :func:`argv_of` holds."""
    return {"profile": 4, "compare-models": 4, "train": 2, "transducer": 4, "stream": 2}.get(job, 1)
