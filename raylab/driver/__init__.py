"""The driver: what runs in the process a user starts, after the command line (raylab/cli/) has settled the run.

One invocation (invocation.py) runs the matrix of trials (matrix.py), each trial (trial.py) a Ray Train trainer
(trainer.py, resources.py, batchsize.py for --batch max, precision.py for --precision) beside its sink actor
(sink.py) and the thread that watches it (progress.py), ending as outcome.py records; --baseline runs the plain
scripts (baseline.py), a StepBench its step benchmark (stepbench.py). It reaches the cluster through cluster.py
(tpu.py for TPU placement), writes MLflow through tracking.py alone, prints through console.py, and compares
(compare.py, protocol.py). floor.py measures `raylab floor`.
"""
