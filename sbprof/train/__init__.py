"""The training-profile job (``sbprof train``): real SpeechBrain training loops, profiled by one decorator.

- :mod:`sbprof.train.config`: ``train_profile.yaml`` -> :class:`~sbprof.train.config.TrainConfig`;
- :mod:`sbprof.train.models`: the Conformer CTC and transducer modules (SpeechBrain layers);
- :mod:`sbprof.train.data`: LibriSpeech-shaped mock-up batches;
- :mod:`sbprof.train.brains`: the training code (``Brain`` subclasses, nothing about profiling);
- :mod:`sbprof.train.plan`: each (variant x setting) a cell, in runs, for the one runner;
- :mod:`sbprof.train.worker`: one decorator on the Brain, then memory, FLOPs, parameters, traces, in a worker.

The figures and the analysis are :mod:`sbprof.analysis.train`, the report
:mod:`sbprof.report.train`. Importing this package imports none of them.
"""
