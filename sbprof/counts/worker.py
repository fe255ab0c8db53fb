"""The worker of a count command: builds the target and counts it (``python -m sbprof.counts.worker RESULT_FD``).

- ``params``: parameter counts (:func:`sbprof.measuring.params.count_params`), tied tensors once;
- ``flops``: FLOPs and MACs of one call, per module and operator (:mod:`sbprof.measuring.flops`), and of its backward
  with ``backward``;
- ``modules``: per-module time of ``steps`` calls after one warm-up (:mod:`sbprof.measuring.modules`), and memory
  with ``memory``; through an interface, with the seconds of audio of each call (``audio_s``).

A target that cannot be built is a failed setup (exit code 1); an input that
does not fit the model is bad input (exit code 2). The record keeps the
result's dict in ``extra["result"]`` and the totals in ``counts``.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional

import torch

from sbprof.analysis.counts_payload import CountsPayload
from sbprof.counts.target import CountsConfig
from sbprof.measuring.env import collect_env
from sbprof.base.errors import ConfigError
from sbprof.models.source import LoadedModel, build_module
from sbprof.record import Cell, Counts, Measurement
from sbprof.workers.cells import CellWorker, SetupError, serve_cells
from sbprof.workers.protocol import one_line


def _backward(output: Any) -> None:
    from torch.utils._pytree import tree_flatten

    tensors = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not tensors:
        raise ConfigError("--backward: no output requires a gradient (frozen parameters, or a no_grad call)")
    sum(t.float().sum() for t in tensors).backward()


class CountsWorker(CellWorker):
    """Builds the target once, then counts it (see the module docstring)."""

    def setup(self) -> Dict[str, Any]:
        cfg = self.cfg = CountsConfig.from_dict(self.job["config"])
        torch.manual_seed(cfg.preamble.seed)
        device = self.job["device"]
        self.call: Callable[[], Any]
        self.what = ""
        self.audio_s: Optional[float] = None  # seconds of audio per call: known through an interface only
        try:
            if cfg.source.is_module:
                self.root, _ = build_module(cfg.source, cfg.preamble.seed)
                self.interface = None
            else:
                self.interface = LoadedModel(cfg.source, device, cfg.preamble.seed, cfg.preamble.output_folder)
                self.root = self.interface.modules
        except ConfigError:
            raise
        except Exception as exc:  # HyperPyYAML builds the objects: any failure is a model that cannot be built
            raise SetupError(f"{cfg.target}: cannot be built: {one_line(exc)}") from None
        if self.interface is not None and cfg.command != "params":
            self.call, seconds = self.interface.prepare(cfg.audio_s, cfg.batch_size)
            self.audio_s = seconds
            self.what = f"{cfg.batch_size} x {cfg.audio_s:g} s of noise through {cfg.source.method}"
        elif cfg.command != "params":
            if cfg.input is None:
                raise ConfigError(f"{cfg.target} is a module: give its input shapes with --input, e.g. '[1, 100, 80]'")
            model = self.root.to(device)
            self.inputs = tuple(torch.randn(*shape, device=device) for shape in cfg.input)
            self.call = lambda: model(*self.inputs)
            self.what = f"random tensors of shapes {[list(s) for s in cfg.input]}"
        return {}

    def checked_call(self) -> Any:
        try:
            return self.call()
        except Exception as exc:
            raise ConfigError(f"{self.cfg.target} does not run on its input ({self.what}): {one_line(exc)}") from None

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        cfg = self.cfg
        data = getattr(self, cfg.command)()
        counts = Counts(flops=data.get("flops"), macs=data.get("macs"), params=data.get("total"),
                        trainable_params=data.get("trainable"))
        return Measurement(label=item["label"], cell=Cell.from_dict(item["cell"]), counts=counts,
                           settings={"input": self.what}, env=collect_env(),
                           extra=CountsPayload(command=cfg.command, result=data).to_dict()).to_dict()

    def params(self) -> Dict[str, Any]:
        from sbprof.measuring.params import count_params

        return count_params(self.root).to_dict()

    def flops(self) -> Dict[str, Any]:
        from sbprof.measuring.flops import FlopCounter, count_flops

        if self.interface is not None:
            if self.cfg.backward:
                raise ConfigError("--backward: a pretrained interface's batch call runs without gradients; count a "
                                  "module of it instead (--key)")
            with FlopCounter(self.root) as counter:
                self.checked_call()
            return {**counter.result().to_dict(), "audio_s": self.audio_s}
        try:
            return count_flops(self.root, *self.inputs, backward=self.cfg.backward).to_dict()
        except ConfigError as exc:
            raise ConfigError(f"{self.cfg.target} ({self.what}): {exc}") from None

    def modules(self) -> Dict[str, Any]:
        from sbprof.measuring.modules import ModuleAttribution

        cfg = self.cfg
        attribution = ModuleAttribution(self.root, list(cfg.select) if cfg.select != ("default",) else "default")

        def step() -> None:
            output = self.checked_call()
            if cfg.backward:
                _backward(output)
                self.root.zero_grad(set_to_none=True)

        with attribution:
            for _ in range(cfg.steps + 1):
                with attribution.step("call"):
                    step()
        if cfg.memory:
            attribution.measure_memory(step)
        return {**attribution.breakdown("call", skip_first=1).to_dict(), "audio_s": self.audio_s}


if __name__ == "__main__":
    sys.exit(serve_cells(CountsWorker))
