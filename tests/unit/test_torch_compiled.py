"""torch.compile in the torch trials (raylab/frameworks/torch/compiled.py), through the worker's own pieces and no
Ray: the compiled step trains as the eager one (dropout included), fp16's loss scale runs outside the compiled code,
evaluation's shorter last batch compiles apart from training, a checkpoint of a compiled model restores into
another compiled model, and every compilation is counted (one test: each compilation costs seconds); and
--compile best's racer set up by the worker's own function."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from raylab.frameworks.torch.compiled import compile_model, watch  # noqa: E402
from raylab.frameworks.torch.loss_scale import LossScale  # noqa: E402
from raylab.frameworks.torch.task import TorchTask  # noqa: E402
from raylab.frameworks.torch.state import torch_saver  # noqa: E402
from raylab.frameworks.torch.worker import mean_loss, shard_batches, train_fn  # noqa: E402
from raylab.loop import StepContext  # noqa: E402
from raylab.task import Task, optimizer  # noqa: E402


def model():
    from torch import nn

    return nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))


def trained(execution: str, steps: int, precision: str = "fp32", state=None):
    """(module, compiled model, its step sums, evaluate, CompileWatch, saver) after `steps` steps on one fixed
    problem."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 6)).astype(np.float32)
    y = (x[:, :3].argmax(1)).astype(np.int64)
    task = TorchTask(
        Task(
            models={"torch": model},
            loss="sparse_categorical_crossentropy",
            metrics=("accuracy",),
            optimizer=optimizer("adam", 1e-2),
        ),
        steps,
    )
    torch.manual_seed(0)
    module = task.build_model()
    compiled = compile_model(module, execution)
    task.fused = execution != "eager" or precision == "fp16"
    opt, scheduler = task.build_optimizer(compiled.parameters())
    compiles = watch(4, execution)
    scale = LossScale(opt, torch.device("cpu")) if precision == "fp16" else None
    saver = torch_saver(module, opt, scheduler, scale=scale)
    if state is not None:
        saver.load(state)
    context = (
        StepContext("fp16", autocast=lambda: torch.autocast("cpu", dtype=torch.float16))
        if precision == "fp16"
        else StepContext()
    )
    batches = shard_batches(torch.from_numpy(x), torch.from_numpy(y), 32, seed=0)
    batches.restart(0)
    train = train_fn(task, compiled, opt, scheduler, batches, context, scale, mean_loss(task, execution), compiles)
    sums = train(steps).double().numpy() if steps else None
    evaluate = compiles.apart(task.evaluator(compiled, torch.device("cpu"))) if compiles else None
    return module, sums, evaluate, compiles, saver, (x[:100], y[:100])


def test_a_compiled_step_trains_as_the_eager_one_with_fp16_outside_and_restores_from_a_checkpoint(tmp_path):
    _, eager, _, _, _, _ = trained("eager", 40)
    module, ours, evaluate, compiles, saver, test = trained("inductor", 40)
    assert ours[0] / 40 == pytest.approx(eager[0] / 40, abs=0.1)  # the mean loss over the same 40 batches
    figures = compiles.figures()
    assert figures["compile_count_warmup"] >= 2 and figures["compile_time_warmup_s"] > 0  # model, loss, backward
    assert figures["compiles_after_warmup"] == 0 and compiles.late_steps == []
    results = evaluate(*test)  # 100 rows in batches of 32: the last, of 4, compiles apart, as evaluation's
    assert compiles.figures()["compile_count_eval"] >= 1 and compiles.figures()["compiles_after_warmup"] == 0
    assert results["val_accuracy"] > 0.6
    saver.save(str(tmp_path), 0)
    restored, *_ = trained("inductor", 0, state=str(tmp_path))
    assert all(torch.equal(a, b) for a, b in zip(module.state_dict().values(), restored.state_dict().values()))
    _, scaled, _, fp16, _, _ = trained("inductor", 8, precision="fp16")
    assert np.isfinite(scaled).all() and fp16.figures()["compiles_after_warmup"] == 0


def test_the_race_sets_up_as_the_worker_does_with_the_workers_own_function(monkeypatch):
    """--compile best's racer and a trial's worker call one set-up (threads, seed, Inductor's cache, TF32 off for
    matmuls and cuDNN): a setting added to it reaches both. The racer's candidate then steps the recipe's model."""
    from raylab.frameworks.torch import race, worker

    calls, real = [], worker.setup
    monkeypatch.setattr(worker, "setup", lambda *a: (calls.append(a), real(*a))[1])
    worker.torch_imports(SimpleNamespace(threads=1, seed=3, compile_cache=None))
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True  # as a fresh process has cuDNN's
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(128, 6)).astype(np.float32), rng.integers(0, 3, 128)
    task = Task(
        models={"torch": model},
        loss="sparse_categorical_crossentropy",
        metrics=("accuracy",),
        optimizer=optimizer("adam", 1e-2),
    )
    run, first_s = race.ready(task, x, y, 32, "eager", "fp32", "cpu", 1, 3)
    assert calls == [(1, 3, None), (1, 3, None)]
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    assert first_s > 0 and np.isfinite(run(2)).all()
