"""The job's package is ``sbprof.script``: ``sbprof.run`` stays the public function that runs a job's YAML."""


def test_importing_the_package_leaves_sbprof_run_the_function():
    import sbprof
    import sbprof.script.hooks  # noqa: F401

    assert callable(sbprof.run) and sbprof.run.__module__ == "sbprof.registry"
