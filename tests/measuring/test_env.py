"""What the measuring layer reads of the machine, and how failures are classified."""
import os

from sbprof.base.errors import failure_status
from sbprof.measuring.env import load_average


def test_load_average_is_the_machines_one_minute_load():
    before = os.getloadavg()[0]
    value = load_average()
    after = os.getloadavg()[0]
    assert min(before, after) - 0.01 <= value <= max(before, after) + 0.01


def test_an_input_too_big_to_allocate_is_out_of_memory():
    import torch

    try:
        torch.empty(2**62, dtype=torch.uint8)  # 4 EiB: refused by the allocator
    except RuntimeError as exc:
        assert failure_status(exc) == "oom"
    else:
        raise AssertionError("a 4 EiB tensor was allocated")


def test_others_cpu_counts_another_process_and_not_this_one():
    """Ground truth from outside: a child spinning for 1.5 s reports its own CPU time (resource usage); the
    others' CPU over that window holds at least 90 % of it. This process spinning meanwhile is not counted:
    the others' share stays below the cores left once our own (independently clocked) CPU time is taken."""
    import subprocess
    import sys
    import time

    from sbprof.measuring.env import OthersCpu

    spin = ("import resource, time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.5: pass\n"
            "u = resource.getrusage(resource.RUSAGE_SELF)\nprint(u.ru_utime + u.ru_stime)")
    with OthersCpu() as others:
        child = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
        own0 = time.process_time()
        t = time.perf_counter()
        while time.perf_counter() - t < 1.0:
            pass
        own = time.process_time() - own0
        child_cpu = float(child.communicate()[0])
    assert others.cpu_s >= 0.9 * child_cpu
    # The kernel counts CPU time in 10 ms ticks per core, read at the window's two ends: on a saturated machine the
    # others' share meets this bound, and may pass it by a tick per core and end (seen: 3.2800 against 3.2798 s).
    assert others.cpu_s <= (os.cpu_count() or 1) * (others.wall_s + 0.02) - 0.9 * own


def test_last_level_cache_is_what_lscpu_reads():
    """Ground truth from another reader of the same hardware description: util-linux's lscpu."""
    import shutil
    import subprocess

    import pytest

    from sbprof.measuring.env import collect_env

    if shutil.which("lscpu") is None:
        pytest.skip("lscpu is not installed")
    out = subprocess.run(["lscpu", "-C=ONE-SIZE,LEVEL,TYPE", "-B"], capture_output=True, text=True)
    rows = [line.split() for line in out.stdout.splitlines()[1:] if len(line.split()) == 3]
    caches = [(int(level), int(size)) for size, level, kind in rows if kind in ("Unified", "Data")]
    if out.returncode or not caches:
        pytest.skip("lscpu lists no caches here")
    assert collect_env().llc_bytes == max(caches)[1]
