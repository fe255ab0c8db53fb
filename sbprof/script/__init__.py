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
from sbprof.jobs.job import Job
from sbprof.report.run import render
from sbprof.script.command import load_config, parse
from sbprof.script.plan import Plan

JOB = Job("run", "profile a SpeechBrain recipe or PyTorch script as it runs, without editing it",
          load_config=load_config, plan=Plan, analyse=analyse, render=render, parse=parse, noun="stage",
          resumes=False)
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
