"""Signals in test subprocesses.

A test run started in the background (``pytest &`` from a script, or a CI
runner doing the same) inherits an ignored SIGINT, and so does every process
it starts: Python then installs no Ctrl-C handler, and a test that sends
SIGINT sees nothing happen. Tests that send SIGINT start their subprocess
with :func:`default_sigint` as ``preexec_fn``.
"""
import signal


def default_sigint() -> None:
    """Restore SIGINT's default action in a child before it runs its program."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
