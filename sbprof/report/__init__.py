"""Renderers: they format one job's summary (analysed once, before them) and never measure nor analyse.

One module per format and job: ``sweep_markdown``, ``sweep_csv``,
``sweep_plot`` (written together by :mod:`sbprof.report.sweep`); the other
jobs' renderers beside them. Which renderer a job uses is its registration
(:class:`sbprof.jobs.job.Job`); :func:`sbprof.registry.render_only`
re-renders a saved folder.
"""
