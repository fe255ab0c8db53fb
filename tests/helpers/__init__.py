"""Helpers shared by tests in several folders; importable as ``helpers.*`` because setup.cfg puts ``tests`` on the
path (``pythonpath``), so neither tests nor the workers they start (``PYTHONPATH``) need path hacks."""
