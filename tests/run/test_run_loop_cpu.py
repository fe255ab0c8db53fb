"""The loop's CPU (sbprof/script/loop_cpu.py) against known spins of process CPU time: this process's, sbprof's own
work left out, and a child process's (as a DataLoader worker), read in /proc's clock ticks."""
from __future__ import annotations

import multiprocessing
import os
import time

from sbprof.script.loop_cpu import LoopCPU

TICK = 1 / os.sysconf("SC_CLK_TCK")


def spin(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_the_loops_cpu_leaves_out_what_sbprof_says_was_its_own():
    loop = LoopCPU()
    loop.sample()
    start = time.process_time()
    spin(0.03)  # sbprof's own work between two steps (a FLOP count closing)
    loop.exclude(time.process_time() - start)
    spin(0.02)  # the loop's
    main, workers = loop.sample()
    assert 0.02 <= main < 0.02 + 0.005 and workers == 0.0, main  # a few lines of Python besides the spin


def _worker(ready, done, seconds):
    spin(seconds)
    ready.set()
    done.wait(30)


def test_a_child_process_cpu_is_the_workers_to_a_tick():
    context = multiprocessing.get_context("fork")  # a DataLoader worker's start on Linux
    ready, done = context.Event(), context.Event()
    loop = LoopCPU()
    loop.sample()
    child = context.Process(target=_worker, args=(ready, done, 0.2))
    child.start()
    try:
        assert ready.wait(30)
        main, workers = loop.sample()
    finally:
        done.set()
        child.join(30)
    # Seen from its start (it began after the baseline); read in ticks, so at most one short. Its own start and
    # the event add a little.
    assert 0.2 - TICK <= workers < 0.2 + 0.1, workers
