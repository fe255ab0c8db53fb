"""Worker batches beyond this machine: the executors (local processes, Slurm jobs, Ray tasks), the node's side of a
batch, its events file, and the jobs a run submitted (see :mod:`sbprof.cluster.spec` for the ``executor`` key)."""
