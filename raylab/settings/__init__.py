"""The settings a trial runs with, beyond its recipe: each decided before Ray starts and applied as the trial runs.

- precision.py: what each trial kind applies for --precision (and --precision-fallback), checked before Ray starts;
- pinning.py: --pin-cpus, a trial's training processes on CPUs of their own and the rest of the cluster off them.
"""
