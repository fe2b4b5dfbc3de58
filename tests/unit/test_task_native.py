"""Each Native contract of docs/recipes.md, with its variants, in both frameworks: a metric may return a
tensor or a Python or numpy number (the mean, or a numerator/denominator pair); a loss must return a tensor
(one value per example or the batch mean), and anything else is refused in one line naming the function."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.task import Native, NativeContractError, Task, optimizer

tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

from raylab.frameworks.tf.task import TFTask  # noqa: E402
from raylab.frameworks.torch.task import TorchTask  # noqa: E402

Y = np.array([0.0, 1.0, 2.0, 3.0], "float32")
PRED = np.array([[0.5], [1.0], [2.5], [3.0]], "float32")
ERR_SUM, N = 1.0, 4.0  # sum of |pred - y| over the batch, and its items


def both(**kw):
    task = Task(models={}, **{"loss": "mae", "optimizer": optimizer("adam", 1e-3), **kw})
    return TFTask(task, tf, keras, 10), TorchTask(task, 10)


def err_tf(y, p):
    return tf.reduce_sum(tf.abs(tf.reshape(p, [-1]) - y))


def err_torch(y, p):
    return (p.reshape(-1) - y).abs().sum()


# What a metric may return: (tf fn, torch fn). Every variant gives the ratio ERR_SUM / N.
METRICS = {
    "tensor mean": (lambda y, p: err_tf(y, p) / 4, lambda y, p: err_torch(y, p) / 4),
    "tensor pair": (lambda y, p: (err_tf(y, p), tf.constant(N)), lambda y, p: (err_torch(y, p), torch.tensor(N))),
    "tensor, python float": (lambda y, p: (err_tf(y, p), float(N)), lambda y, p: (err_torch(y, p), float(N))),
    "tensor, python int": (lambda y, p: (err_tf(y, p), 4), lambda y, p: (err_torch(y, p), 4)),
    "tensor, numpy float": (lambda y, p: (err_tf(y, p), np.float32(N)), lambda y, p: (err_torch(y, p), np.float64(N))),
    "numpy pair": (lambda y, p: (np.float64(ERR_SUM), np.array(N)), lambda y, p: (np.float64(ERR_SUM), np.array(N))),
    "python mean": (lambda y, p: ERR_SUM / N, lambda y, p: ERR_SUM / N),
    "int tensor pair": (lambda y, p: (err_tf(y, p), tf.size(y)), lambda y, p: (err_torch(y, p), torch.tensor(4))),
}


@pytest.mark.parametrize("variant", sorted(METRICS))
def test_a_native_metric_may_return_tensors_or_numbers(variant):
    tf_fn, torch_fn = METRICS[variant]
    tft, tot = both(metrics=(Native(tf=tf_fn, torch=torch_fn, name="err"),))
    a = tft.batch_stats(tf.constant(Y), tf.constant(PRED)).numpy()
    b = tot.batch_stats(torch.from_numpy(Y), torch.from_numpy(PRED)).numpy()
    assert a[0] / a[1] == pytest.approx(ERR_SUM / N), a
    assert b[0] / b[1] == pytest.approx(ERR_SUM / N), b
    # in a graph too: what every TF trial runs
    graph = tf.function(lambda y, p: tft.batch_stats(y, p))(tf.constant(Y), tf.constant(PRED)).numpy()
    np.testing.assert_allclose(graph, a)
    # and in a torch training step: the stats stack with the loss
    step = tot.step_stats(torch.tensor(0.5), torch.from_numpy(Y), torch.from_numpy(PRED))
    assert step.shape == (3,)


@pytest.mark.parametrize("bad", [[1.0, 2.0, 3.0], "0.5", (1.0, 2.0, 3.0)])
def test_a_metric_returning_something_else_is_refused_in_one_line_naming_it(bad):
    def peak(y, p):
        return bad

    tft, tot = both(metrics=(Native(tf=peak, torch=peak, name="peak"),))
    for call in (
        lambda: tft.batch_stats(tf.constant(Y), tf.constant(PRED)),
        lambda: tot.batch_stats(torch.from_numpy(Y), torch.from_numpy(PRED)),
    ):
        with pytest.raises((NativeContractError, ValueError, TypeError, RuntimeError)) as err:
            call()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("value", [0.5, np.float32(0.5), np.array([0.5, 0.5, 0.5, 0.5])])
def test_a_loss_must_be_a_tensor_with_gradients(value):
    tft, tot = both(loss=Native(tf=lambda y, p: value, torch=lambda y, p: value, name="flat"))
    with pytest.raises(
        NativeContractError,
        match=r"custom loss `flat` \(test_a_loss_must_be_a_tensor.*<lambda>\) "
        r"returned .*not a TensorFlow tensor",
    ):
        tft.per_example_loss(tf.constant(Y), tf.constant(PRED))
    with pytest.raises(NativeContractError, match=r"custom loss `flat` .* returned .*not a torch tensor"):
        tot.per_example_loss(torch.from_numpy(Y), torch.from_numpy(PRED))


def test_a_loss_may_be_per_example_or_the_batch_mean_in_both():
    mean = Native(
        tf=lambda y, p: tf.reduce_mean(tf.abs(tf.reshape(p, [-1]) - y)),
        torch=lambda y, p: (p.reshape(-1) - y).abs().mean(),
    )
    each = Native(tf=lambda y, p: tf.abs(tf.reshape(p, [-1]) - y), torch=lambda y, p: (p.reshape(-1) - y).abs())
    for loss in (mean, each):
        tft, tot = both(loss=loss)
        pred = tf.Variable(PRED)
        with tf.GradientTape() as tape:
            a = tft.per_example_loss(tf.constant(Y), pred)
            total = tf.reduce_mean(a)
        assert a.shape == (4,) and float(total) == pytest.approx(0.25)
        assert tape.gradient(total, pred) is not None
        b = tot.per_example_loss(torch.from_numpy(Y), torch.from_numpy(PRED))
        assert b.shape == (4,) and float(b.mean()) == pytest.approx(0.25)
