"""Layer 1, the measuring primitives: clocks, memory peaks, profiler events, machine facts, energy, FLOPs,
parameters and per-module attribution. Jobs and decorators build on them; none of them formats a report.
"""
