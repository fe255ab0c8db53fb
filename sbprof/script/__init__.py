"""``sbprof run``: profile a SpeechBrain recipe or a PyTorch script as it runs, without editing it.

(The package is ``script``, not ``run``: ``sbprof.run`` is the public function that runs a job's YAML.)

The script runs as ``__main__`` in the profiling process (:mod:`sbprof.script.launch`)
with hooks installed first (:mod:`sbprof.script.hooks`), which find its steps;
:mod:`sbprof.script.session` measures them (:mod:`sbprof.script.steps` for the clocks)
and :mod:`sbprof.script.plan` hands one record per stage to the one runner.
"""
