"""``sbprof run``: profile a SpeechBrain recipe or a PyTorch script as it runs, without editing it.

(The package is ``script``, not ``run``: ``sbprof.run`` is the public function that runs a job's YAML.)

The script runs as ``__main__`` in the profiling process (:mod:`sbprof.script.launch`)
with hooks installed first (:mod:`sbprof.script.hooks`), which find its steps;
:mod:`sbprof.script.session` measures them (:mod:`sbprof.script.steps` for the clocks)
and :mod:`sbprof.script.plan` hands one record per stage to the one runner. Under torchrun each rank's steps
also go to its rank file (:mod:`sbprof.script.ranks`); ``--ddp`` starts the process group for a recipe that does
not (:mod:`sbprof.script.ddp`).

:data:`JOB` names the parts: the command line (:mod:`sbprof.script.command`),
the plan, the analysis :mod:`sbprof.analysis.run` and the report
:mod:`sbprof.report.run`. The command prints the report on standard error
(standard output is the script's) and exits with the script's own code
(:mod:`sbprof.cli.run`).
"""
from sbprof.analysis.run import analyse
from sbprof.jobs.job import Job, Lazy
from sbprof.report.run import render

# The parts in this package are named lazily: each plan imports its Job for its name, and the command line's
# modules import the plans' configurations.
JOB = Job("run", "profile a SpeechBrain recipe or PyTorch script as it runs, without editing it",
          load_config=Lazy("sbprof.script.command", "load_config"), plan=Lazy("sbprof.script.plan", "Plan"),
          analyse=analyse, render=render, parse=Lazy("sbprof.script.command", "parse"), noun="stage",
          resumes=False)
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
VARY = Job("vary", "sbprof run --vary: the script under each variant, the measured gain of each",
           load_config=Lazy("sbprof.script.vary_command", "load_config"),
           plan=Lazy("sbprof.script.vary_plan", "VaryPlan"),
           analyse=Lazy("sbprof.analysis.vary", "analyse"), render=Lazy("sbprof.report.vary", "render"),
           parse=Lazy("sbprof.script.vary_command", "parse"), noun="run")
"""``sbprof run --vary`` (:mod:`sbprof.cli.vary`): not in the registry, since ``sbprof run`` leads to it."""
