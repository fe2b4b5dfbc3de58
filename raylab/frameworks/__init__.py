"""The frameworks raylab runs, one package each with the same parts: tf/ (TensorFlow), torch/ (PyTorch), xla/
(PyTorch/XLA). The registry that names them, and what each part is, is raylab/registry.py."""
