"""pytest plugin: the ``sbprof_budget`` fixture holds a model's RTF or peak memory to a stored baseline.

Installed with sbprof (entry point ``pytest11``); or load it with
``-p sbprof.pytest_plugin``. In a test::

    def test_asr_stays_fast(sbprof_budget):
        sbprof_budget.check("encoder_asr-2s", source="encoder_asr", type="EncoderASR",
                            audio_s=2.0, metric="rtf", threshold=0.10)

The first run (no baseline yet) measures the model in ``runs`` fresh
processes, stores that as the baseline under ``--sbprof-baselines`` (default
``<rootdir>/.sbprof-baselines/<name>``; commit it) and skips the test with a
message saying so. Later runs measure again and fail the test when the gate
(:func:`sbprof.analysis.gate.gate`) calls the model regressed: slower (or
heavier) beyond ``threshold`` with its 95% interval excluding no change;
on CPU time (the worker's threads' CPU time per audio second) when other
processes' load beside the runs explains their wall-time spread, which the
failure message then says (``judged on CPU time: load ...``).
``--sbprof-update-baselines`` records new baselines instead of checking.
Bad options fail the test in one ``sbprof: error:`` line before anything is
measured or deleted; a failed or interrupted update keeps the stored baseline.
Nothing heavy is imported until a test uses the fixture.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

BASELINE_FOLDER = ".sbprof-baselines"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("sbprof", "sbprof budgets (the sbprof_budget fixture)")
    group.addoption("--sbprof-baselines", default=None, metavar="DIR",
                    help=f"folder of stored sbprof budget baselines (default: <rootdir>/{BASELINE_FOLDER})")
    group.addoption("--sbprof-update-baselines", action="store_true", default=False,
                    help="record new sbprof budget baselines instead of checking against the stored ones")


class Budget:
    """What the ``sbprof_budget`` fixture gives a test.

    Arguments
    ---------
    baseline_dir : Path
        Where baselines are stored.
    update : bool
        Record instead of checking.
    """

    def __init__(self, baseline_dir: Path, update: bool):
        self.baseline_dir = baseline_dir
        self.update = update

    def check(self, name: str, *, source: Optional[str] = None, type: Optional[str] = None,
              method: Optional[str] = None, args: Optional[list] = None, overrides: Optional[dict] = None,
              yaml: Optional[str] = None, module: Optional[str] = None, **options: Any) -> Any:
        """Measure the model and hold it to its baseline ``name``; fail the test when it regressed.

        The model is a pretrained interface (``source``, ``type``, optional
        ``method``/``args``/``overrides``) or a HyperPyYAML module (``yaml``,
        ``module``); ``options`` go to :func:`sbprof.compare_models.budget.check_budget`
        (``audio_s``, ``batch_size``, ``metric``, ``threshold``, ``runs``,
        ``samples``, ...). Returns the :class:`~sbprof.compare_models.budget.BudgetResult`.
        """
        from sbprof.base.checks import nearest
        from sbprof.compare_models.budget import OPTIONS, check_budget
        from sbprof.base.errors import SbprofError

        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            pytest.fail(f"sbprof: error: sbprof_budget.check: unknown option {unknown[0]!r}"
                        f"{nearest(unknown[0], OPTIONS)}; known: {', '.join(OPTIONS)}", pytrace=False)
        variant = {k: v for k, v in dict(source=source, type=type, method=method, args=args, overrides=overrides,
                                         yaml=yaml, module=module).items() if v is not None}
        try:
            result = check_budget(name, variant, self.baseline_dir, update=self.update, **options)
        except SbprofError as exc:  # bad input or a failed run: one line, nothing stored changed
            error = str(exc)
        else:
            error = None
        if error is not None:
            pytest.fail(f"sbprof: error: {error}", pytrace=False)
        if result.status == "failed":
            pytest.fail(result.message, pytrace=False)
        if result.status == "recorded":
            pytest.skip(result.message)
        return result


@pytest.fixture
def sbprof_budget(request: Any) -> Budget:
    """Hold a model's RTF or peak memory to a stored baseline (see the module docstring)."""
    config = request.config
    folder = config.getoption("sbprof_baselines")
    baseline_dir = Path(folder) if folder else Path(config.rootpath) / BASELINE_FOLDER
    return Budget(baseline_dir, config.getoption("sbprof_update_baselines"))
