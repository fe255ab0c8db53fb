"""``sbprof run``: profile a SpeechBrain recipe or a PyTorch script as it runs, without editing it.

The script runs as ``__main__`` in the profiling process (:mod:`sbprof.run.launch`)
with hooks installed first (:mod:`sbprof.run.hooks`), which find its steps;
:mod:`sbprof.run.session` measures them (:mod:`sbprof.run.steps` for the clocks)
and :mod:`sbprof.run.plan` hands one record per stage to the one runner.
"""
