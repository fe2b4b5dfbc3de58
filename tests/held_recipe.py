"""A user's recipe that holds its training at a known point: the fashion MLP in TF, torch and JAX, whose model waits at
one training step of each trial until whoever runs it lets it go on. A test or a tool that acts on a trial mid-epoch
(kills its driver, its worker: tests/e2e/test_resume.py, bench/restart.py) acts while the trial is held there, however
fast this machine runs the steps: the trial cannot end first, and the act cannot land before the point.

With RAYLAB_TEST_GATE=DIR in the driver's environment (read there, it travels with the models), each trial's model, at
its HOLD_AT-th training step in a Ray Train worker (its `steps-per-epoch` x 1.5: mid-epoch 2), writes DIR/held-N (N
counts the holds in DIR, from 1; the file holds the worker's pid) and waits for DIR/release-N, at most HOLD_S seconds
(RAYLAB_TEST_HOLD_AT=STEP holds there instead: a `--resume` run's command line does not give the steps;
RAYLAB_TEST_LAST_AT=STEP holds torch's model again at the evaluation after training step STEP). With RAYLAB_TEST_PACE=k
(k > 1) every training step takes k times as long (`Counter`): the tests that act on a held trial run so to show that
their outcome does not depend on this machine's speed. Without either, the recipe trains as recipes/fashion.py does (the
model is the same, wrapped). Tests may also hold torch's model as it is built and at the evaluation after its last step
(`recipe(at_build=..., last_at=...)`).

How each framework's model holds: torch's (and torch_xla's, whose forward runs on the host each step) in its
forward; TF's in a layer that runs a `tf.py_function` in training steps (not under XLA: `--compile off` or `best`,
whose XLA candidate then fails its race), except tf:ps's, whose steps run on remote TF tasks where no Python of the
recipe's runs: there the layer holds in the graph (`graph_hold`: a step counter on the ps, a file written and another
polled by TF's own ops; the held file names the chief, a process of the trial, and RAYLAB_TEST_PACE does not slow
it); JAX's through `jax.debug.callback` in the jitted training step (traced where the module's dropout is not
deterministic: `model.train()`). Whoever lets the holds go reads them through `Gate`.

    RAYLAB_TEST_GATE=/tmp/gate python tests/held_recipe.py --trials torch:none --steps-per-epoch 200
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path

from raylab import main
from raylab.models.mlp import torch_model as mlp

ROOT = Path(__file__).resolve().parents[1]
HOLD_S = 600  # a held trial nobody releases goes on after this (its driver is usually gone long before)
BUILDS = itertools.count(1)  # tf:ps models built in this process: each holds under names of its own


def steps_per_epoch() -> int:
    argv = sys.argv
    return int(argv[argv.index("--steps-per-epoch") + 1]) if "--steps-per-epoch" in argv else 200


def in_train_worker() -> bool:
    """Whether this process is a Ray Train worker (its title says so): a --compile best race's actor, which steps the
    same model before the trials, never holds."""
    try:
        return Path("/proc/self/cmdline").read_bytes().startswith(b"ray::RayTrainWorker")
    except OSError:
        return False


def hold(gate: Path, at: str = "step") -> None:
    """Holds this Ray Train worker until released: DIR/held-N holds its pid (and, held anywhere but at a training
    step, where: "build" or "last")."""
    if not in_train_worker():
        return
    n = len(list(gate.glob("held-*"))) + 1
    while True:  # the first free number, taken atomically: two ranks of one group hold at the same step
        try:
            fd = os.open(gate / f"held-{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            break
        except FileExistsError:
            n += 1
    os.write(fd, (str(os.getpid()) + ("" if at == "step" else f" {at}")).encode())
    os.close(fd)
    deadline = time.monotonic() + HOLD_S
    while not (gate / f"release-{n}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


class Counter:
    """A model's training steps in this process: holds at the `hold_at`-th (with a gate); with `pace` k > 1, each
    step takes k times as long as it ran (a machine k times slower): after CALIBRATE steps run as they come, each
    sleeps k - 1 times the shortest of them (not their median: torch_xla's first steps compile, seconds each; not
    each step's own time: in a group whose ranks wait on each other, a rank's step would hold the others' sleeps,
    and they would grow without bound)."""

    CALIBRATE = 10

    def __init__(self, hold_at: int, gate: str | None, pace: float = 1.0):
        self.hold_at, self.gate, self.pace, self.steps = hold_at, gate, pace, 0
        self.times: list[float] = []
        self.last: float | None = None

    def __call__(self, *_) -> None:
        now = time.perf_counter()
        if self.pace > 1 and self.last is not None:
            if len(self.times) < self.CALIBRATE:
                self.times.append(now - self.last)
            else:
                time.sleep((self.pace - 1) * min(min(self.times), 1.0))
        self.steps += 1
        if self.gate and self.steps == self.hold_at:
            hold(Path(self.gate))
        self.last = time.perf_counter()


class Gate:
    """A gate directory as whoever lets its holds go sees it: `holds()` lists the holds not yet let go whose process
    has written its pid, oldest first, as (file name, pid, where: "step", "build" or "last"); `release(name)` lets
    one go (its trial goes on)."""

    def __init__(self, path):
        self.path, self.released = Path(path), set()

    def holds(self) -> list[tuple[str, int, str]]:
        found = []
        for held in self.path.glob("held-*"):
            text = "" if held.name in self.released else held.read_text().strip()
            if text:  # empty: its pid not written yet
                pid, _, at = text.partition(" ")
                found.append((held.stat().st_mtime_ns, held.name, int(pid), at or "step"))
        return [found_[1:] for found_ in sorted(found)]

    def release(self, name: str) -> None:
        self.released.add(name)
        (self.path / name.replace("held", "release", 1)).touch()

    def release_all(self) -> None:
        for name, *_ in self.holds():
            self.release(name)


def torch_model(hold_at: int = 0, gate: str | None = None, pace: float = 1.0, at_build: bool = False, last_at: int = 0):
    """torch's held model; with `at_build` it also holds as it is built in a Ray Train worker (a worker group
    starting the trial), with `last_at` at the evaluation after its `last_at`-th training step (the last epoch's)."""
    from torch import nn

    if gate and at_build:
        hold(Path(gate), "build")

    class Held(nn.Module):
        def __init__(self):
            super().__init__()
            self.net, self.counter, self.ended = mlp(), Counter(hold_at, gate, pace), False

        def forward(self, x):
            if self.training:
                self.counter()
            elif gate and last_at and self.counter.steps == last_at and not self.ended:
                self.ended = True
                hold(Path(gate), "last")
            return self.net(x)

    return Held()


def tf_model(hold_at: int = 0, gate: str | None = None, pace: float = 1.0, keras=None):
    from raylab.models.mlp import tf_model as tf_mlp

    net = tf_mlp(keras)
    if not gate and pace == 1:
        return net
    import tensorflow as tf

    if keras is None:
        import keras
    counter = Counter(hold_at, gate, pace)
    in_graph = "ParameterServer" in type(tf.distribute.get_strategy()).__name__  # built in the strategy's scope
    step = graph_hold(tf, hold_at, gate) if in_graph and gate and in_train_worker() else None

    class Hold(keras.layers.Layer):
        def call(self, x, training=None):
            if not training or (in_graph and step is None):
                return x
            done = step() if step else tf.py_function(lambda: counter() or 0, [], tf.int32)
            with tf.control_dependencies([done]):
                return tf.identity(x)

    return keras.Sequential([keras.Input((28, 28)), Hold(), *net.layers])


def graph_hold(tf, hold_at: int, gate: str):
    """tf:ps's hold, for the chief to trace into its workers' steps: a counter on the ps counts every worker's
    steps; the one that makes it `hold_at` x workers (the chief's round `hold_at`) writes GATE/held-tfps-... (the
    chief's pid in it: a process of the trial) and polls for its release file every 20 ms with TF's own ops (a
    sleeping dataset), at most HOLD_S. Paths are built from the counter: TF would fold a constant one while
    optimizing the graph, before any step."""
    from tensorflow.python.data.experimental.ops.testing import sleep

    workers = len(json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {}).get("worker", [])) or 1
    count = tf.Variable(0, dtype=tf.int64, trainable=False)  # on a ps; held by this closure, not by the model
    name, pid = f"tfps-{os.getpid()}-{next(BUILDS)}-", str(os.getpid())

    def nap(k):
        return [k + tf.data.Dataset.range(1).apply(sleep(20_000)).reduce(tf.constant(0, tf.int64), lambda a, b: a + b)]

    def wait(n):
        tag = tf.strings.join([name, tf.strings.as_string(n)])
        written = tf.io.write_file(tf.strings.join([gate, "/held-", tag]), pid)
        with tf.control_dependencies([written]):
            release, end = tf.strings.join([gate, "/release-", tag]), tf.timestamp() + HOLD_S
            return tf.while_loop(
                lambda _: tf.logical_and(tf.size(tf.io.matching_files(release)) == 0, tf.timestamp() < end),
                nap,
                [tf.constant(0, tf.int64)],
            )[0]

    def step():
        n = count.assign_add(1)
        return tf.cond(tf.equal(n, hold_at * workers), lambda: wait(n), lambda: tf.constant(0, tf.int64))

    return step


def jax_model(hold_at: int = 0, gate: str | None = None, pace: float = 1.0, rngs=None):
    from flax import nnx

    from raylab.models.mlp import jax_model as jax_mlp

    counter = Counter(hold_at, gate, pace)

    class Held(nnx.Module):
        def __init__(self, rngs):
            self.net = jax_mlp(rngs)

        def __call__(self, x):
            if (gate or pace > 1) and not self.net.dropout.deterministic:  # a training step's trace
                import jax

                jax.debug.callback(counter)
            return self.net(x)

    return Held(rngs)


def recipe(
    gate: str | None = None,
    hold_at: int | None = None,
    pace: float | None = None,
    at_build: bool = False,
    last_at: int = 0,
):
    """The held variant of recipes/fashion.py: its models hold at `hold_at` (default: 1.5 x the command line's
    --steps-per-epoch, or RAYLAB_TEST_HOLD_AT) when `gate` (default: RAYLAB_TEST_GATE) is a directory, and run
    `pace` (default: RAYLAB_TEST_PACE, else 1) times slower. torch's also holds as it is built (`at_build`) and at
    the evaluation after training step `last_at` (default: RAYLAB_TEST_LAST_AT; torch_model). All of it travels with
    the models to the workers."""
    import importlib.util
    from functools import partial

    spec = importlib.util.spec_from_file_location("fashion", ROOT / "recipes" / "fashion.py")
    fashion = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fashion)
    gate = gate or os.environ.get("RAYLAB_TEST_GATE") or None
    hold_at = hold_at or int(os.environ.get("RAYLAB_TEST_HOLD_AT") or steps_per_epoch() * 3 // 2)
    pace = pace or float(os.environ.get("RAYLAB_TEST_PACE") or 1)
    last_at = last_at or int(os.environ.get("RAYLAB_TEST_LAST_AT") or 0)
    models = {
        "tf": partial(tf_model, hold_at, gate, pace),
        "jax": partial(jax_model, hold_at, gate, pace),
        "torch": partial(torch_model, hold_at, gate, pace, at_build, last_at),
    }
    return fashion.RECIPE.variant(name="held", models=models, default_trials=("torch:none",), default_workers=(1,))


RECIPE = recipe()

if __name__ == "__main__":
    main(RECIPE)
