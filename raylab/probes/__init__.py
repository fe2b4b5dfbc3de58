"""Probes: what raylab measures before or beside the trials, and keeps for this host.

- race.py, choice.py: `--compile best`, each framework's executions raced on the recipe's model and the one a trial
  trains in chosen from the race (kept per host, model and settings);
- batchsize.py: `--batch max`, the largest batch per replica whose steps fit (probe trials);
- floor.py: `raylab floor`, the start-up floor (a trial of no work, per framework);
- peak.py, utilization.py: `raylab peak`, the measured peak FLOP/s, and a trial's share of it;
- host.py: this host's identity (what a kept answer belongs to); fingerprint.py: a model's source, the races' other key.

A probe reads the driver's console and trainer (raylab/driver/); the driver runs the probes before and beside the
trials it runs.
"""
