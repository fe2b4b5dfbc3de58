"""The frameworks raylab runs, one package each with the same parts: tf/ (TensorFlow), torch/ (PyTorch), xla/
(PyTorch/XLA), jax/ (JAX). The registry that names them, and what each part is, is raylab/registry.py. Beside
them, what every framework's worker uses alike: cpu_threads.py, rendezvous.py, prewarm.py (start-up overlap) and
plain.py (the best plain script, `--plain`)."""
