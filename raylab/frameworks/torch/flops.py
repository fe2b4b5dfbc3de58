"""The work of one training step in PyTorch, counted by torch's own FLOP counter (`torch.utils.flop_counter`): the
matrix products and convolutions of the forward pass and of the gradients (2 FLOPs a multiply-add), on a copy of the
model on the meta device, so that nothing is computed and the model is not touched."""

from __future__ import annotations


def count(task, module, x, y) -> int:
    """FLOPs of the forward pass and the gradients of one training step on the batch (x, y) (tensors of the
    recipe's inputs and targets, on any device): `module` the model as built (not DDP's wrapper nor compiled)."""
    import copy

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    meta = copy.deepcopy(module).to("meta").train()
    on_meta = lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t  # noqa: E731
    x, y = (torch.utils._pytree.tree_map(on_meta, v) for v in (x, y))
    with FlopCounterMode(display=False) as counter:
        task.per_example_loss(y, meta(x)).mean().backward()
    return counter.get_total_flops()


def of(task, module):
    """flops(x, y) for the loop (raylab/loop/epochs.py Training.flops): the module's step on prepared numpy items."""

    def flops(x, y) -> int:
        from raylab.frameworks.torch.task import to_tensors

        return count(task, module, to_tensors(x), to_tensors(y))

    return flops


def activations_of(module):
    """activations(x) for the loop (Training.activations): the activation functions the module's forward pass calls
    on prepared numpy items (raylab/frameworks/torch/layers.py)."""

    def activations(x) -> dict:
        from raylab.frameworks.torch.layers import activations
        from raylab.frameworks.torch.task import to_tensors

        return activations(module, to_tensors(x))

    return activations


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def matmul(n: int, dtype: str, device: str, threads: int):
    """run(k): k products of two n x n matrices in `dtype` on `device` ("cpu", "gpu"), waited for (`raylab peak`);
    float32 in float32 (TF32 off, as the trials)."""
    import torch

    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    where = torch.device("cuda" if device == "gpu" else "cpu")
    a, b = (torch.randn(n, n, device=where).to(getattr(torch, DTYPES[dtype])) for _ in range(2))

    def run(k: int) -> None:
        for _ in range(k):
            c = a @ b
        if where.type == "cuda":
            torch.cuda.synchronize()
        del c

    return run
