"""Real SpeechBrain Brains and ground-truth readers shared by the decorator tests."""
import json
from pathlib import Path

import speechbrain as sb
import torch

MiB = 2**20


class TinyBrain(sb.Brain):
    """A real Brain: a linear regressor trained with SGD."""

    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])


def make_brain(cls=TinyBrain, **run_opts):
    torch.manual_seed(0)
    return cls({"model": torch.nn.Linear(16, 4)}, lambda p: torch.optim.SGD(p, lr=0.1),
               hparams={"output_folder": run_opts.pop("output_folder", "unused")},
               run_opts={"device": "cpu", **run_opts})


def data(n):
    g = torch.Generator().manual_seed(1)
    return [[torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)] for _ in range(n)]


def marker_steps(prof):
    """How many ``ProfilerStep#N`` markers (torch's own) the selected events hold."""
    return sum(1 for e in prof.events() if e.name.startswith("ProfilerStep"))


def allocator_step_peaks(trace_dir: Path, device_type: int = 0):
    """Per labelled step, the rise of the allocator's own "Total Allocated" above its value
    just before the step, read from exported chrome traces (independent of sbprof's replay)."""
    peaks = {}
    for path in sorted(Path(trace_dir).glob("*.pt.trace.json")):
        events = json.loads(path.read_text())["traceEvents"]
        memory = sorted((e for e in events if e.get("name") == "[memory]"
                         and e["args"].get("Device Type") == device_type), key=lambda e: e["ts"])
        for e in events:
            if e.get("ph") == "X" and e.get("name", "").startswith("sbprof.step:"):
                inside = [m for m in memory if e["ts"] <= m["ts"] <= e["ts"] + e["dur"]]
                if inside:
                    base = inside[0]["args"]["Total Allocated"] - inside[0]["args"]["Bytes"]
                    rise = max(m["args"]["Total Allocated"] for m in inside) - base
                    peaks[(path.name, e["ts"])] = (e["name"], max(rise, 0))
    return list(peaks.values())


def replay_peaks(raw_profiler, prefix):
    """Per ``record_function`` label starting with ``prefix``: the highest net CPU bytes allocated since
    it began, replayed here from a raw ``torch.profiler.profile(profile_memory=True)`` session's own
    ``[memory]`` records (independent of sbprof's reading)."""
    raw = list(raw_profiler.profiler.kineto_results.events())
    memory = sorted((e.start_ns(), e.nbytes()) for e in raw
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    peaks = {}
    for label in (e for e in raw if e.name().startswith(prefix)):
        running = peak = 0
        for t, nbytes in memory:
            if label.start_ns() <= t <= label.end_ns():
                running += nbytes
                peak = max(peak, running)
        peaks[label.name()] = peak
    return peaks
