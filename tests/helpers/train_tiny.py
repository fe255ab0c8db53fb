"""A tiny training configuration: seconds on a CPU, every code path of the recipe."""
TINY_MODEL = {"n_mels": 20, "d_model": 16, "num_layers": 1, "nhead": 2, "d_ffn": 32, "kernel_size": 3,
              "vocab_size": 12, "embedding_dim": 8, "predictor_dim": 8, "joint_dim": 8}
TINY_DATA = {"batch_size": 2, "num_batches": 2, "scale": 0.05, "sample_rate": 16000}


def tiny_overrides(output_folder, **more):
    return {"model": TINY_MODEL, "data": TINY_DATA, "warmup": 1, "measured": 2, "cpu_threads": 1,
            "devices": "cpu", "output_folder": str(output_folder), **more}


def tiny_argv(output_folder, *extra):
    """The same as command-line overrides, SpeechBrain-style."""
    import json

    argv = []
    for key, value in tiny_overrides(output_folder).items():
        argv += [f"--{key}", json.dumps(value) if not isinstance(value, str) else value]
    return argv + list(extra)


def train_ctc(folder, precision="fp32", devices="cpu"):
    """The tiny CTC variant trained by the real job at ``precision`` (per-module memory left out): its one record,
    checked ok, and its report."""
    from sbprof.registry import get_job
    from sbprof.jobs.runner import run_config
    from sbprof.results import load_results
    from sbprof.train.config import validate

    tree = {**tiny_overrides(folder, variants=["ctc"], devices=devices, profiling={"memory": False}),
            "precision": precision}
    outcome = run_config(get_job("train"), validate(tree, "tiny.yaml", {"noprogressbar": True}), log=lambda line: None)
    (record,) = load_results(outcome.results).records
    assert record.ok, record.message
    return record, (outcome.results.parent / "report.md").read_text()
