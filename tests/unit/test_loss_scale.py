"""fp16's loss scale in torch (raylab/frameworks/torch/loss_scale.py): a non-finite gradient skips the update and
halves the scale, counted on the device; a fused optimizer takes the decision without a host read, another one
costs GradScaler's read per step, which is counted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from raylab.frameworks.torch.loss_scale import LossScale  # noqa: E402 - after torch is known to import


def _step(model, scale, x, poison: bool):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.float16):
        y = model(x)
    loss = y.float().mean() * (float("inf") if poison else 1.0)
    scale.backward(loss)
    scale.step()


@pytest.mark.parametrize("fused, reads", [(True, 0), (False, 3)])
def test_a_non_finite_step_is_skipped_and_halves_the_scale(fused, reads):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=fused)
    scale = LossScale(optimizer, torch.device("cpu"))
    assert scale.on_device is fused
    x = torch.randn(8, 4) * 1e-3  # small: the scaled gradients stay finite in float16
    _step(model, scale, x, poison=False)
    before = [p.detach().clone() for p in model.parameters()]
    _step(model, scale, x, poison=True)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the update was skipped
    _step(model, scale, x, poison=False)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # and training goes on
    assert scale.figures() == {"loss_scale": 2.0**15, "skipped_steps": 1}
    assert scale.reads == reads

    restored = LossScale(optimizer, torch.device("cpu"))
    restored.load_state_dict(scale.state_dict())
    assert restored.figures() == scale.figures()
