"""The task API in JAX: optax and jax.numpy build the same loss, metrics, optimizer and schedule as torch does from one
declaration (real JAX and PyTorch on the same numbers, no Ray), and a Native function per framework is honoured."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.task import Metric, Native, NativeContractError, Schedule, Task, lr_factor, optimizer

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
optax = pytest.importorskip("optax")

from raylab.frameworks.jax.task import JaxTask  # noqa: E402
from raylab.frameworks.torch.task import TorchTask  # noqa: E402

RNG = np.random.default_rng(0)


def both(task: Task, total_steps: int = 100):
    return JaxTask(task, total_steps), TorchTask(task, total_steps)


def task_of(**kw) -> Task:
    return Task(models={}, **{"loss": "mse", "optimizer": optimizer("adam", 1e-3), **kw})


@pytest.mark.parametrize(
    "loss,y,pred",
    [
        ("sparse_categorical_crossentropy", RNG.integers(0, 10, 16), RNG.normal(size=(16, 10))),
        ("binary_crossentropy", (RNG.random((4, 6, 6, 1)) > 0.5).astype("float32"), RNG.normal(size=(4, 6, 6, 1))),
        ("mean_squared_error", RNG.normal(size=16), RNG.normal(size=(16, 1))),  # (batch, 1) against (batch,)
        ("mae", RNG.normal(size=(16, 3)), RNG.normal(size=(16, 3))),
    ],
)
def test_each_portable_loss_is_the_same_number_in_jax_and_torch(loss, y, pred):
    jt, tt = both(task_of(loss=loss))
    y = y.astype("int32" if y.dtype.kind == "i" else "float32")
    a = np.asarray(jt.per_example_loss(y, pred.astype("float32")))
    b = tt.per_example_loss(
        torch.from_numpy(y.astype("int64" if y.dtype.kind == "i" else "float32")),
        torch.tensor(pred, dtype=torch.float32),
    ).numpy()
    assert a.shape == b.shape == (len(y),)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_weighted_sum_over_named_outputs():
    task = task_of(
        loss={"mask": "binary_crossentropy", "depth": "mae"},
        loss_weights={"mask": 2.0, "depth": 0.5},
        outputs=("mask", "depth"),
    )
    jt, tt = both(task)
    y = {
        "mask": (RNG.random((3, 4, 4, 1)) > 0.5).astype("float32"),
        "depth": RNG.random((3, 4, 4, 1)).astype("float32"),
    }
    pred = [RNG.normal(size=(3, 4, 4, 1)).astype("float32"), RNG.random((3, 4, 4, 1)).astype("float32")]
    a = np.asarray(jt.per_example_loss(y, tuple(pred)))
    b = tt.per_example_loss({k: torch.from_numpy(v) for k, v in y.items()}, tuple(torch.from_numpy(p) for p in pred))
    np.testing.assert_allclose(a, b.numpy(), rtol=1e-5)


@pytest.mark.parametrize(
    "metric,y,pred,expected",
    [
        ("accuracy", np.array([0, 1, 2, 1]), np.array([[9, 0, 0], [0, 9, 0], [9, 0, 0], [0, 0, 9]]), 0.5),
        (
            Metric("top_k_accuracy", k=2),
            np.array([0, 1, 2, 1]),
            np.array([[9, 5, 0], [0, 9, 5], [9, 5, 0], [5, 0, 9]]),
            0.5,
        ),
        ("mae", np.array([1.0, 2.0, 3.0, 4.0]), np.array([[1.5], [2.0], [2.0], [4.0]]), 0.375),
        ("mse", np.array([1.0, 2.0, 3.0, 4.0]), np.array([[1.5], [2.0], [2.0], [4.0]]), 0.3125),
        ("iou", np.array([[1.0, 1.0, 0.0, 0.0]]), np.array([[5.0, -5.0, 5.0, -5.0]]), 1 / 3),
        ("dice", np.array([[1.0, 1.0, 0.0, 0.0]]), np.array([[5.0, -5.0, 5.0, -5.0]]), 0.5),
        ("accuracy", np.array([1.0, 0.0, 1.0, 0.0]), np.array([[3.0], [-1.0], [-2.0], [-4.0]]), 0.75),  # binary, logits
    ],
)
def test_each_portable_metric_gives_the_same_sums_in_jax_and_torch(metric, y, pred, expected):
    jt, tt = both(task_of(metrics=(metric,)))
    a = np.asarray(jt.batch_stats(y.astype("int32" if y.dtype.kind == "i" else "float32"), pred.astype("float32")))
    b = tt.batch_stats(
        torch.from_numpy(y.astype("int64" if y.dtype.kind == "i" else "float32")),
        torch.tensor(pred, dtype=torch.float32),
    ).numpy()
    np.testing.assert_allclose(a, b)
    assert a[0] / a[1] == pytest.approx(expected)


@pytest.mark.parametrize(
    "schedule",
    [
        Schedule(),
        Schedule("cosine", warmup=10),
        Schedule("cosine", floor=0.1),
        Schedule("step", every=30, gamma=0.5, warmup=5),
    ],
)
@pytest.mark.parametrize(
    "name,args",
    [("adam", {"epsilon": 1e-7}), ("adamw", {"weight_decay": 0.05}), ("sgd", {"momentum": 0.9, "nesterov": True})],
)
def test_optimizer_and_schedule_are_built_alike_and_update_alike(schedule, name, args):
    """What each reports it built, and three updates of the same parameters from the same gradients: optax's and
    torch's rules agree (epsilon outside the root of the bias-corrected moment in both)."""
    task = task_of(optimizer=optimizer(name, 0.01, **args), schedule=schedule)
    jt, tt = both(task, total_steps=100)
    x = np.zeros((2, 3), "float32")
    p0, grads = RNG.normal(size=5).astype("float32"), [RNG.normal(size=5).astype("float32") for _ in range(3)]
    t_param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    t_opt, t_sched = tt.build_optimizer([t_param])
    torch_only = ("optimizer_capturable", "optimizer_fused", "optimizer_impl")  # how torch runs the same rule
    assert jt.built(x) == {k: v for k, v in tt.built(t_opt, t_sched, x).items() if k not in torch_only}
    tx = jt.build_optimizer()
    params, state = jax.numpy.asarray(p0), None
    state = tx.init(params)
    for g in grads:
        updates, state = tx.update(jax.numpy.asarray(g), state, params)
        params = optax.apply_updates(params, updates)
        t_param.grad = torch.from_numpy(g.copy())
        t_opt.step()
        if t_sched:
            t_sched.step()
    np.testing.assert_allclose(np.asarray(params), t_param.detach().numpy(), rtol=1e-5, atol=1e-7)
    lr = jt.learning_rate(0.01)
    for step in (0, 9, 10, 50, 99):
        got = float(lr(step)) if callable(lr) else lr
        assert got == pytest.approx(0.01 * lr_factor(schedule, step, 100), rel=1e-5, abs=1e-8)


def test_native_loss_metric_and_optimizer_in_jax():
    jnp = jax.numpy
    task = task_of(
        loss=Native(jax=lambda y, p: jnp.abs(p - y).sum(1)),
        metrics=(Native(jax=lambda y, p: p.max(), name="peak"),),
        optimizer=Native(jax=lambda lr: optax.sgd(0.5), name="mine"),
    )
    jt = JaxTask(task, 10)
    y, pred = np.zeros((2, 3), "float32"), np.arange(6, dtype="float32").reshape(2, 3)
    assert np.asarray(jt.per_example_loss(y, pred)).tolist() == [3.0, 12.0]
    assert np.asarray(jt.batch_stats(y, pred)).tolist() == [10.0, 2.0]  # mean 5 x 2 items
    tx = jt.build_optimizer()
    updates, _ = tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
    assert np.asarray(updates).tolist() == [-0.5, -0.5]
    assert jt.built(pred)["built_optimizer"] == "custom"


def test_a_native_loss_that_is_not_an_array_is_refused_in_one_line():
    jt = JaxTask(task_of(loss=Native(jax=lambda y, p: 1.0, name="bad")), 10)
    with pytest.raises(NativeContractError, match="returned float 1.0, not a JAX array"):
        jt.per_example_loss(np.zeros(2, "float32"), np.zeros((2, 1), "float32"))
