"""A Native torch loss may return the batch mean (a scalar), as raylab.task.Native documents, or one value per
example."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_native_torch_loss_scalar_or_per_example():
    from raylab.frameworks.torch.task import TorchTask
    from raylab.task import Native, Task

    pred, y = torch.randn(4, 1, requires_grad=True), torch.randn(4)
    per_example = (pred.reshape(-1) - y).square()
    scalar = TorchTask(
        Task(models={}, loss=Native(torch=lambda t, p: (p.reshape(-1) - t).square().mean()), optimizer=None), 1
    )
    each = TorchTask(Task(models={}, loss=Native(torch=lambda t, p: (p.reshape(-1) - t).square()), optimizer=None), 1)
    assert scalar.per_example_loss(y, pred).shape == (4,)
    assert torch.allclose(scalar.per_example_loss(y, pred).mean(), per_example.mean())
    assert torch.allclose(each.per_example_loss(y, pred), per_example)
    scalar.per_example_loss(y, pred).mean().backward()  # gradients flow through the expanded mean
    assert torch.allclose(pred.grad.reshape(-1), 2 * (pred.reshape(-1) - y).detach() / 4)
