"""``sbprof transducer`` (also ``python recipes/transducer.py``): the transducer-loss benchmark.

Usage::

    sbprof transducer CONFIG.yaml [--key value ...] [--retry_failed]

Every configured RNN-T loss backend is checked against the plain-PyTorch
reference and measured in worker processes (possibly under another Python
interpreter); ``report.md``, ``results.csv`` and ``results.json`` go to
``output_folder``. Any ``--key value`` overrides that key of the YAML file,
SpeechBrain-style, e.g. ``--device cuda:0 --batching "{batch_size: 30}"
--shapes "{scale: 1}" --search "{backends: [torchaudio]}"``. Running the
same command again measures only what is missing there; ``--retry_failed``
measures again the backends whose records ended in error, out of memory or
"not installed".

Exit codes: 0 done (a failed backend is a result, not a failure of the
run), 1 the run could not go on (a full disk), 2 bad input (nothing
measured), 130 interrupted (finished backends kept).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

from sbprof.cli.common import EXIT_CONFIG, EXIT_OK, job_config, print_outputs, run_in_folder

if TYPE_CHECKING:
    from sbprof.results import Results


def main(argv: Optional[List[str]] = None, prog: str = "sbprof transducer") -> int:
    """Parse, validate, lock the output folder, measure, render; return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n", 1)[1].replace("sbprof transducer", prog, 1))
        return 0 if argv else EXIT_CONFIG
    start = time.perf_counter()
    from sbprof.transducer.config import FLAGS, SCHEMA

    cfg = job_config(argv, list(SCHEMA), FLAGS, (), "sbprof.transducer.config:load_config")
    if cfg is None:
        return EXIT_CONFIG
    from sbprof.results import StorageError
    from sbprof.results.store import RESULTS_FILE
    from sbprof.transducer.report import write_reports
    from sbprof.transducer.runner import run_benchmark

    outputs: Dict[str, Path] = {}

    def render(results: "Results", folder: Path) -> None:
        try:
            outputs.update(write_reports(results, folder))
        except OSError as exc:
            raise StorageError(f"cannot write the reports in {folder}: {exc.strerror or exc}; results.json keeps "
                               "every finished record") from None

    code, done = run_in_folder(cfg.output_folder, lambda folder: (folder, run_benchmark(
        cfg, on_progress=lambda results: render(results, folder))), "backends")
    if code:
        return code
    folder, results = done
    if "report" in outputs:
        print(outputs["report"].read_text())
    print_outputs({**outputs, "results": folder / RESULTS_FILE})
    print(f"{len(results.records)} record(s) in {time.perf_counter() - start:.0f} s")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
