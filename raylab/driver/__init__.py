"""The driver: what runs in the process a user starts, after the command line (raylab/cli/) has settled the run.

One invocation (invocation.py) holds the cluster's nodes against other jobs (hold.py) and runs the matrix of trials
(matrix.py), each trial (trial.py) a Ray Train trainer (trainer.py, with the controller's failure policy in
policy.py; what it reserves, resources.py), cold or in a warm worker group
(groups.py), watched by progress.py; --plain runs the plain scripts (plain_runs.py), a StepBench its step benchmark
(stepbench.py). Each trial ends as outcome.py says and keeps or removes its checkpoints (retention.py). What is
measured before or beside the trials is raylab/probes/ (the race for --compile best, --batch max, the floor, the
peak); the settings a trial runs with beyond its recipe (--precision, --pin-cpus), raylab/settings/; the
process's plumbing, raylab/runtime/ (the Ray connection, the stop signals, the console). It records
through raylab/record/ and compares through raylab/compare/.
"""
