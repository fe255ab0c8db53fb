"""Layer 0, the base every other part stands on: errors, field checks, config loading, input files, statistics.

Pure: nothing here imports torch or another sbprof package.
"""
