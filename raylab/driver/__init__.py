"""The driver: what runs in the process a user starts, after the command line (raylab/cli/) has settled the run.

One invocation (invocation.py) runs the matrix of trials (matrix.py), each trial (trial.py) a Ray Train trainer
(trainer.py, with the controller's failure policy in policy.py; resources.py, batchsize.py for --batch max,
precision.py for --precision, raylab/probes/race.py for --compile best), cold or in a warm worker group (groups.py), watched by
progress.py; --plain runs the plain scripts (plain_runs.py), a StepBench its step benchmark (stepbench.py). It
reaches the cluster through cluster.py (raylab/tpu.py for TPU placement), stops cleanly on a signal
(stopping.py), prints through console.py, ends each trial as outcome.py says and keeps or removes its checkpoints
(retention.py). It records through raylab/record/ and compares through raylab/compare/. floor.py measures
`raylab floor`.
"""
