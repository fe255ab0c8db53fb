"""The recipes under ``recipes/`` are scripts that ``sbprof run`` runs, launched by the tests; not test modules."""
collect_ignore_glob = ["recipes/*"]
