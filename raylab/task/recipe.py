"""The recipes a user writes: a `Recipe` (a training task described once, run as many trials) and a `StepBench`
(one operation timed per iteration in each framework; raylab/driver/stepbench.py runs it, with a `BenchContext`
for each builder).

A recipe is data, one model builder per framework, and the task: loss, optimizer (+ schedule),
metrics and preprocessing, as portable names (raylab.task) or callables per framework. Builders
are plain functions that import their framework inside, so a recipe file never drags
TensorFlow into a torch worker (and they pickle by value from a recipe's __main__).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from raylab.registry import frameworks
from raylab.task import Schedule, Task


@dataclass(frozen=True)
class Recipe:
    name: str
    # (x_train, y_train, x_test, y_test) numpy arrays (or dicts of named arrays), a raylab.data.Dataset,
    # or a function returning one of them: runs once, on the driver.
    data: Any
    # framework -> builder returning an un-compiled model; a "tf" builder takes an optional `keras`
    # module (tf:ps builds with tf_keras: ParameterServerStrategy needs it, keras#18624).
    models: dict[str, Callable[..., Any]]
    loss: Any  # e.g. "sparse_categorical_crossentropy", {"mask": "binary_crossentropy", "depth": "mae"}
    optimizer: Any  # raylab.task.optimizer("adam", 1e-3, epsilon=1e-7), or Native(tf=..., torch=...)
    batch_per_replica: int  # global batch = batch_per_replica x replicas (weak scaling)...
    epochs: int
    schedule: Schedule = Schedule()  # the learning rate over the run (constant by default)
    metrics: Any = ()  # e.g. ("accuracy",), {"mask": ["iou"], "depth": ["mae"]}
    loss_weights: dict | None = None  # {output: weight}: the loss is the weighted sum over outputs
    preprocess: Any = None  # inputs: None (cast to float32, never scaled), Scale(1/255), a function or Native
    default_trials: tuple[str, ...] = ("tf:none", "torch:ddp")
    default_workers: tuple[int, ...] = (1,)
    # The test accuracy the time-to-accuracy figure waits for: one value, or one per dataset name
    # (a recipe whose data falls back to another dataset); none on synthetic data.
    target_accuracy: float | dict[str, float] | None = None
    quick_train: int = 8192  # --quick: this many training items...
    quick_test: int = 2000  # ...and this many test items, 1 epoch
    warmup_steps: int = 20  # steps left out of steady-state timing (tracing, caches)
    seed: int = 0
    # ...unless the recipe fixes the global batch (strong scaling): each replica then takes global_batch / replicas.
    global_batch: int | None = None
    steps_per_epoch: int | None = None  # None: an epoch is one pass over each worker's shard
    precision: str = "fp32"
    doc: str = field(default="", compare=False)

    def per_replica(self, replicas: int) -> int:
        """The batch each replica takes when `replicas` train in sync."""
        return self.global_batch // replicas if self.global_batch else self.batch_per_replica

    def target(self, ds) -> float | None:
        """The target accuracy for the data that actually loaded."""
        if ds.synthetic or self.target_accuracy is None:
            return None
        return self.target_accuracy.get(ds.name) if isinstance(self.target_accuracy, dict) else self.target_accuracy

    def task(self, outputs: tuple[str, ...] = ()) -> Task:
        """What the workers build, as declared (outputs: the data's named targets, in order)."""
        return Task(
            models=self.models,
            loss=self.loss,
            optimizer=self.optimizer,
            schedule=self.schedule,
            metrics=self.metrics,
            loss_weights=self.loss_weights,
            preprocess=self.preprocess,
            outputs=outputs,
        )

    def with_batch(self, batch: int | None) -> "Recipe":
        """The recipe at another batch size (--batch): the global batch where it fixes one, else per replica."""
        if batch is None:
            return self
        return self.variant(global_batch=batch) if self.global_batch else self.variant(batch_per_replica=batch)

    def variant(self, **changes) -> "Recipe":
        """An edited copy (e.g. a longer schedule) with everything else unchanged."""
        return replace(self, **changes)


def single_kinds() -> dict[str, str]:
    """Each framework's one-process trial kind -> its framework: what a step benchmark runs."""
    return {f"{fw.name}:{fw.single}": fw.name for fw in frameworks()}


@dataclass(frozen=True)
class StepBench:
    name: str
    # whose builder (a framework's `models`: xla uses torch's on an XLA device) -> builder(ctx) -> (run_once, facts)
    builders: dict[str, Callable[["BenchContext"], tuple[Callable[[], Any], dict]]]
    batch: int  # items per iteration (samples/s = batch / iteration time)
    iterations: int  # timed iterations
    warmup: int  # untimed-for-steady-state iterations before them (the first is the trace/compile)
    quick_batch: int
    quick_iterations: int = 2
    default_trials: tuple[str, ...] = field(default_factory=lambda: tuple(single_kinds()))
    what: str = "iteration"  # what one iteration is, for the logs
    doc: str = field(default="", compare=False)


@dataclass
class BenchContext:
    """What a builder gets on the worker."""

    framework: str
    batch: int
    threads: int
    seed: int
    device: Any = None  # torch builders: the device to put tensors on (cpu, cuda:0 or the XLA device)
    sync: Callable[[], None] = lambda: None  # torch builders: call at the end of an iteration (XLA: run the graph)
    bf16: bool = False  # torch builders: autocast to bf16 (applied on CUDA and XLA TPU; recorded)
