"""The GPU check's environment: carried wheels installed offline, and the versions the check ran with.

The GPU machine has no network and its own Python and torch (not the pinned
ones). ``benchmarks/gpu_wheels.sh`` downloads, where PyPI is reachable, the
wheels it lacks into ``gpu_wheels/`` (ignored by git, carried to the machine).
:func:`install_missing` installs from that folder only the distributions the
interpreter does not have, with ``pip install --no-deps --no-index`` into a
folder of the checkout put first on ``PYTHONPATH`` (so nothing of the machine's
own environment is replaced, torch least of all), and :func:`versions` says
what the check then ran with.

Example
-------
>>> dist_name("ruamel_yaml_clib-0.2.15-cp312-cp312-manylinux2014_x86_64.whl"), normalise("HyperPyYAML")
('ruamel-yaml-clib', 'hyperpyyaml')
"""
from __future__ import annotations

import importlib
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "gpu_wheels"
SITE = ROOT / ".gpu_site"

NEEDED = ("torch", "torchaudio", "speechbrain", "hyperpyyaml", "soundfile", "numpy", "scipy", "tabulate", "psutil",
          "tqdm", "sentencepiece", "matplotlib", "pytest", "pynvml")
"""Modules the check's parts import; one missing is named in the versions (its parts then fail with the reason)."""


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_name(wheel: str) -> str:
    """The distribution a wheel file holds (its name up to the first dash, normalised)."""
    return normalise(Path(wheel).name.split("-", 1)[0])


def installed(name: str) -> bool:
    """Whether this interpreter (with the current ``sys.path``) has the distribution."""
    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def missing_wheels(folder: Path) -> List[Path]:
    """The wheels in ``folder`` whose distribution this interpreter lacks."""
    return sorted(w for w in folder.glob("*.whl") if not installed(dist_name(w.name)))


def use_site(site: Path = SITE) -> None:
    """Put the checkout and ``site`` first on this process's path and on its children's ``PYTHONPATH``."""
    entries = [str(site), str(ROOT)]
    for entry in reversed(entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in entries]
    os.environ["PYTHONPATH"] = os.pathsep.join(entries + rest)
    importlib.invalidate_caches()


def install_missing(folder: Path = WHEELS, site: Path = SITE, timeout_s: float = 120) -> Tuple[List[str], str]:
    """Install the wheels of ``folder`` that this interpreter lacks into ``site``, offline and without
    dependencies; returns (the distributions installed, a problem in one line or "")."""
    use_site(site)
    if not folder.is_dir():
        return [], f"no wheel folder {folder.name}/ (bash benchmarks/gpu_wheels.sh makes it where PyPI is reachable)"
    wheels = missing_wheels(folder)
    if not wheels:
        return [], ""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-compile", "--disable-pip-version-check", "--target", str(site),
                           *map(str, wheels)], capture_output=True, text=True, timeout=timeout_s)
    importlib.invalidate_caches()
    if done.returncode:
        last = (done.stderr.strip() or done.stdout.strip() or "pip failed").splitlines()[-1]
        return [], f"pip install from {folder.name}/ failed: {last}"
    return [dist_name(w.name) for w in wheels], ""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no nvidia-smi)"


def _git() -> str:
    if os.environ.get("SBPROF_COMMIT"):  # a copy of the checkout without .git (how it reaches the GPU machine)
        return os.environ["SBPROF_COMMIT"]
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        return done.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def unimportable(modules: Sequence[str] = NEEDED) -> List[str]:
    """The modules that do not import here, each with its error in a few words."""
    bad = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a broken install is as missing as an absent one
            bad.append(f"{name} ({type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''})")
    return bad


def versions(installed_now: Sequence[str] = ()) -> Dict[str, str]:
    """What the check runs with: Python, torch and its CUDA, the driver, the GPU, speechbrain, the checkout."""
    import torch

    gpu = "none"
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = f"{torch.cuda.get_device_name(0)} ({props.total_memory / 2 ** 30:.0f} GiB, {torch.cuda.device_count()} " \
              f"device(s), compute capability {props.major}.{props.minor})"
    return {
        "GPU": gpu, "driver": _driver(), "Python": platform.python_version(), "torch": torch.__version__,
        "CUDA (torch's)": str(torch.version.cuda), "cuDNN": str(torch.backends.cudnn.version()),
        "torchaudio": _version("torchaudio"), "speechbrain": _version("speechbrain"), "numpy": _version("numpy"),
        "nvidia-ml-py": _version("nvidia-ml-py"), "sbprof checkout": _git(),
        "installed from gpu_wheels/": ", ".join(installed_now) or "nothing",
        "not importable": ", ".join(unimportable()) or "none",
    }
