"""The scripts under ``scripts/`` run under torchrun, launched by the tests; they are not test modules."""
collect_ignore_glob = ["scripts/*"]
