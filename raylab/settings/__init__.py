"""The settings a trial runs with, beyond its recipe: each decided before Ray starts and applied as the trial runs.

- resolve.py: the one place a trial's settings (accelerator, strategy, precision, execution, threads) are resolved
  from what was asked, and every combination that cannot run is refused before Ray starts;
- precision.py: what each trial kind applies for --precision, and why a kind cannot (why_not);
- pinning.py: --pin-cpus, a trial's training processes on CPUs of their own and the rest of the cluster off them.
"""
