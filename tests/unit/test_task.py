"""The task API: TF and torch build the same loss, metrics, optimizer and schedule from one declaration.

Real TensorFlow and PyTorch, no Ray: each portable name is computed by both frameworks on the same
numbers, and what each reports it built is compared, so a framework that built something else fails here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from raylab.errors import UserError
from raylab.task import Cast, Metric, Native, Scale, Schedule, Task, check, lr_factor, optimizer
from raylab.task.common import prepare_inputs

tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

from raylab.frameworks.tf.task import TFTask  # noqa: E402
from raylab.frameworks.torch.task import TorchTask  # noqa: E402

RNG = np.random.default_rng(0)


def both(task: Task, total_steps: int = 100):
    return TFTask(task, tf, keras, total_steps), TorchTask(task, total_steps)


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
def test_each_portable_loss_is_the_same_number_in_both_frameworks(loss, y, pred):
    tft, tot = both(task_of(loss=loss))
    y = y.astype("int32" if y.dtype.kind == "i" else "float32")
    a = tft.per_example_loss(tf.constant(y), tf.constant(pred, tf.float32)).numpy()
    b = tot.per_example_loss(
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
    tft, tot = both(task)
    y = {
        "mask": (RNG.random((3, 4, 4, 1)) > 0.5).astype("float32"),
        "depth": RNG.random((3, 4, 4, 1)).astype("float32"),
    }
    pred = [RNG.normal(size=(3, 4, 4, 1)).astype("float32"), RNG.random((3, 4, 4, 1)).astype("float32")]
    a = tft.per_example_loss({k: tf.constant(v) for k, v in y.items()}, [tf.constant(p) for p in pred]).numpy()
    b = tot.per_example_loss({k: torch.from_numpy(v) for k, v in y.items()}, tuple(torch.from_numpy(p) for p in pred))
    np.testing.assert_allclose(a, b.numpy(), rtol=1e-5)
    bce = np.mean(np.maximum(pred[0], 0) - pred[0] * y["mask"] + np.log1p(np.exp(-np.abs(pred[0]))), axis=(1, 2, 3))
    np.testing.assert_allclose(a, 2.0 * bce + 0.5 * np.abs(pred[1] - y["depth"]).mean(axis=(1, 2, 3)), rtol=1e-5)


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
        ("iou", np.array([[1.0, 1.0, 0.0, 0.0]]), np.array([[5.0, -5.0, 5.0, -5.0]]), 1 / 3),
        ("dice", np.array([[1.0, 1.0, 0.0, 0.0]]), np.array([[5.0, -5.0, 5.0, -5.0]]), 0.5),
    ],
)
def test_each_portable_metric_gives_the_same_ratio_in_both_frameworks(metric, y, pred, expected):
    tft, tot = both(task_of(metrics=(metric,)))
    y_tf = tf.constant(y.astype("int32" if y.dtype.kind == "i" else "float32"))
    y_torch = torch.from_numpy(y.astype("int64" if y.dtype.kind == "i" else "float32"))
    a = tft.batch_stats(y_tf, tf.constant(pred, tf.float32)).numpy()
    b = tot.batch_stats(y_torch, torch.tensor(pred, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(a, b)
    assert a[0] / a[1] == pytest.approx(expected)


@pytest.mark.parametrize(
    "kw,y,pred",
    [
        (
            dict(loss="sparse_categorical_crossentropy", metrics=("accuracy",)),
            RNG.integers(0, 3, (3, 8)),
            RNG.normal(size=(3, 8, 3)),
        ),
        (dict(metrics=("mae", "accuracy")), RNG.normal(size=(3, 8)), RNG.normal(size=(3, 8, 1))),
        (
            dict(loss="binary_crossentropy", metrics=("iou", "dice")),
            (RNG.random((3, 2, 4)) > 0.5),
            RNG.normal(size=(3, 2, 4)),
        ),
    ],
)
def test_the_windows_running_sums_are_the_sums_of_each_steps_stats(kw, y, pred):
    """StepSums (the fast path a torch trial's step takes: in-place adds, the usual accuracy line, counts as numbers)
    gives the window the same vector as summing step_stats' stacked vectors, step by step, window after window."""
    tot = TorchTask(task_of(**kw), 10)
    ys = [torch.from_numpy(v.astype("int64" if v.dtype.kind == "i" else "float32")) for v in y]
    preds = [torch.tensor(p, dtype=torch.float32) for p in pred]
    losses = [torch.tensor(float(i) + 0.25) for i in range(len(ys))]
    sums = tot.step_sums()
    for _ in range(2):  # a second window starts from nothing
        for loss, yb, pb in zip(losses, ys, preds):
            sums.add(loss, yb, pb)
        got = sums.take()
        expected = sum(tot.step_stats(loss, yb, pb) for loss, yb, pb in zip(losses, ys, preds))
        assert got.dtype == torch.float32 and got.shape == expected.shape
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    assert losses[0].item() == 0.25  # the first step's loss is copied, never added to in place


def test_the_running_sums_never_add_into_a_recipes_tensor_or_a_cached_count():
    """A recipe's own metric may return a tensor it keeps, and a batch mean is weighted by a cached count tensor:
    the window's sums copy them at its first step and add into the copies."""
    kept = (torch.tensor(3.0), torch.tensor(4.0))
    metrics = (
        Native(torch=lambda y, p: kept, tf=lambda y, p: kept, name="pair"),
        Native(torch=lambda y, p: (p[:, 0] - y).abs().mean(), tf=lambda y, p: 0.0, name="mae_mean"),
    )
    tot = TorchTask(task_of(metrics=metrics), 10)
    y, pred = torch.zeros(8), torch.ones(8, 1)
    sums = tot.step_sums()
    for _ in range(3):
        sums.add(torch.tensor(0.5), y, pred)
    np.testing.assert_allclose(sums.take().numpy(), [1.5, 9.0, 12.0, 24.0, 24.0])
    assert (kept[0].item(), kept[1].item()) == (3.0, 4.0)
    np.testing.assert_allclose(tot.step_stats(torch.tensor(0.5), y, pred).numpy(), [0.5, 3.0, 4.0, 8.0, 8.0])


def test_native_metric_and_loss_per_framework():
    task = task_of(
        loss=Native(tf=lambda y, p: tf.reduce_sum(tf.abs(p - y), 1), torch=lambda y, p: (p - y).abs().sum(1)),
        metrics=(Native(tf=lambda y, p: tf.reduce_max(p), torch=lambda y, p: p.max(), name="peak"),),
    )
    tft, tot = both(task)
    y, pred = np.zeros((2, 3), "float32"), np.arange(6, dtype="float32").reshape(2, 3)
    assert tft.per_example_loss(tf.constant(y), tf.constant(pred)).numpy().tolist() == [3.0, 12.0]
    assert tot.per_example_loss(torch.from_numpy(y), torch.from_numpy(pred)).tolist() == [3.0, 12.0]
    assert tot.batch_stats(torch.from_numpy(y), torch.from_numpy(pred)).tolist() == [10.0, 2.0]  # mean 5 x 2 items
    assert task.metric_names() == ["peak"]


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
def test_optimizer_and_schedule_are_built_alike(schedule, name, args):
    """The optimizer each framework built, and its learning rate over the run, read back from the objects."""
    task = task_of(optimizer=optimizer(name, 0.01, **args), schedule=schedule)
    tft, tot = both(task, total_steps=100)
    x = np.zeros((2, 3), "float32")
    tf_built = tft.built(tft.build_optimizer(), x)
    t_opt, t_sched = tot.build_optimizer([torch.nn.Parameter(torch.zeros(3))])
    torch_built = tot.built(t_opt, t_sched, x)
    for key in ("built_optimizer", "built_lr_schedule", "built_loss", "built_preprocess"):
        assert tf_built[key] == torch_built[key], key
    assert tf_built["built_optimizer"].startswith(f"{name}(")
    lrs = [0.01 * lr_factor(schedule, s, 100) for s in range(100)]
    for step in (0, 1, 9, 10, 50, 99):  # torch's LambdaLR after `step` updates, Keras' schedule at `step`
        t_lr = t_sched.get_last_lr()[0] if t_sched else 0.01
        k_lr = tft.build_optimizer()._learning_rate
        k_lr = float(k_lr(step)) if callable(k_lr) else 0.01
        if step == 0:
            assert t_lr == pytest.approx(lrs[0])
        assert k_lr == pytest.approx(lrs[step], rel=1e-5, abs=1e-8)  # float32 in TF
    if t_sched:
        for _ in range(50):
            t_opt.step()
            t_sched.step()
        assert t_sched.get_last_lr()[0] == pytest.approx(lrs[50], rel=1e-9)


def test_cosine_decays_to_its_floor_after_warmup():
    s = Schedule("cosine", warmup=10, floor=0.1)
    assert lr_factor(s, 0, 110) == pytest.approx(0.1)  # warm-up starts at 1/warmup
    assert lr_factor(s, 9, 110) == pytest.approx(1.0)
    assert lr_factor(s, 60, 110) == pytest.approx(0.55)
    assert lr_factor(s, 110, 110) == pytest.approx(0.1)


def test_nothing_scales_inputs_unless_the_recipe_says_so():
    x = np.array([[0, 128, 255]], dtype=np.uint8)
    assert prepare_inputs(None, x, "tf").tolist() == [[0.0, 128.0, 255.0]]
    assert prepare_inputs(Scale(1 / 255), x, "torch").max() == pytest.approx(1.0)
    assert prepare_inputs(None, {"a": x}, "tf")["a"].dtype == np.float32


def test_cast_keeps_integer_inputs_integer_and_refuses_to_cut_floats():
    """Token ids: uint8 arrays (as stored and sent) become the declared int32, values kept; named inputs take their
    own dtype, the rest float32 as without preprocessing; float inputs cast to integers are refused at the door."""
    ids = np.array([[0, 7, 255]], np.uint8)
    out = prepare_inputs(Cast("int32"), ids, "torch")
    assert out.dtype == np.int32 and out.tolist() == [[0, 7, 255]]
    both = prepare_inputs(Cast({"ids": "int32"}), {"ids": ids, "mask": ids}, "jax")
    assert (both["ids"].dtype, both["mask"].dtype) == (np.int32, np.float32)
    assert Cast("int32").describe() == "cast to int32"
    task = Task(models={}, loss="sparse_categorical_crossentropy", optimizer=optimizer("adam", 1e-3))
    check(dataclasses.replace(task, preprocess=Cast("int32")), (), {None: "uint8"})
    with pytest.raises(UserError, match="are float32, and Cast would cut them to int32"):
        check(dataclasses.replace(task, preprocess=Cast("int32")), (), {None: "float32"})
    with pytest.raises(UserError, match=r"Cast names inputs \['tokens'\]"):
        check(dataclasses.replace(task, preprocess=Cast({"tokens": "int32"})), (), {"ids": "uint8"})
    with pytest.raises(UserError, match="integer or float dtype"):
        Cast("text")


@pytest.mark.parametrize(
    "task,targets,message",
    [
        (task_of(loss="hinge"), (), "unknown loss 'hinge'"),
        (task_of(optimizer=optimizer("lamb", 1e-3)), (), "unknown optimizer 'lamb'"),
        (task_of(optimizer=optimizer("sgd", 1e-3, epsilon=1e-7)), (), "sgd takes momentum, nesterov, not epsilon"),
        (task_of(optimizer=optimizer("adam", -1.0)), (), "learning rate is -1.0"),
        (task_of(schedule=Schedule("exponential")), (), "unknown schedule 'exponential'"),
        (task_of(metrics=("f1",)), (), "unknown metric 'f1'"),
        (task_of(loss="mse"), ("mask", "depth"), "give the loss as a dict"),
        (task_of(loss={"mask": "bce"}), ("mask",), "unknown loss 'bce'"),
        (task_of(loss={"masks": "binary_crossentropy"}), ("mask",), "names output 'masks'"),
        (task_of(loss={"mask": "binary_crossentropy"}, metrics={"depth": ["mae"]}), ("mask",), "output 'depth'"),
    ],
)
def test_bad_declarations_are_one_clear_user_error(task, targets, message):
    with pytest.raises(UserError, match=message):
        check(task, targets)


def test_both_frameworks_take_the_target_first():
    """One argument order for every framework's task, Keras' (y_true, y_pred): the next backend can't mix them up."""
    import inspect

    for method in ("per_example_loss", "batch_stats"):
        for cls in (TFTask, TorchTask):
            assert list(inspect.signature(getattr(cls, method)).parameters)[1:] == ["y", "pred"], (cls, method)
    assert list(inspect.signature(TorchTask.step_stats).parameters)[1:] == ["loss", "y", "pred"]


def test_the_tf_race_sets_up_with_the_workers_own_functions(monkeypatch):
    """--compile best's TF racer: the environment, float32 matmuls (TF32 off), threads, seed and precision policy
    set by the functions a tf:none worker calls (raylab/frameworks/tf/worker.py), not a copy of them."""
    from raylab.frameworks.tf import race, worker

    calls = []
    for name in ("import_tf", "numerics"):
        real = getattr(worker, name)
        monkeypatch.setattr(worker, name, lambda *a, real=real, name=name: (calls.append(name), real(*a))[1])
    threads = tf.config.threading.get_intra_op_parallelism_threads()  # set once a process: as this one has it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # what import_tf sets for a CPU trial, undone after the test
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    got_tf, got_keras = race._set_up("fp32", "cpu", threads, 7)
    assert calls == ["import_tf", "numerics"] and got_tf is tf
    assert not tf.config.experimental.tensor_float_32_execution_enabled()
    assert got_keras.mixed_precision.global_policy().name == "float32"
