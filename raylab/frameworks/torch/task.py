"""The declared task, built in PyTorch: the one place torch, torch:ps-* and xla trials (and the plain
script) get their inputs, loss, optimizer, schedule, metrics and evaluation from.

Imported only in torch processes. Tensors keep the data's layout: a model that wants channels
first says so itself.
"""

from __future__ import annotations

import functools

import numpy as np

from raylab.data import num_items, tree_map
from raylab.task import (
    PY_MATH,
    Metric,
    Native,
    NativeContractError,
    Task,
    canonical_loss,
    is_number,
    lr_factor,
    returned,
)
from raylab.task.common import TaskBuilder, built_report, prepare_inputs, prepare_targets, schedule_probe, test_batches


def to_tensors(x, device=None):
    import torch

    def one(a):
        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
        return t.to(device) if device else t

    return tree_map(one, x)


def take(x, idx):
    """Rows `idx` of a tensor or of each tensor in a dict."""
    return tree_map(lambda a: a[idx], x)


class TorchTask(TaskBuilder):
    NATIVE = ("torch", "a torch tensor", "torch")

    def __init__(self, task: Task, total_steps: int, xla: bool = False):
        super().__init__(task, total_steps)
        self.xla = xla  # Adam and AdamW keep their step on the device (capturable)
        # Fused Adam, AdamW and SGD (one kernel per parameter group, on the CPU and CUDA): what a careful user
        # writes, and the plain yardstick's (0.71 against 1.00 ms a step of the fashion MLP with torch's default
        # per-tensor Adam on this repository's CPU, bench/results.md). fp16's loss scale needs it (the skip
        # decision is the optimizer's). torch_xla has no fused kernels: its Adam keeps its step on the device.
        self.fused = not xla

    # --- data ---------------------------------------------------------------------------------------
    def inputs(self, x):
        return prepare_inputs(self.task.preprocess, x, "torch")

    def targets(self, y):
        return prepare_targets(y, np.int64)

    # --- model and optimizer ------------------------------------------------------------------------
    def build_model(self):
        return self.task.models["torch"]()

    def build_optimizer(self, params):
        """(optimizer, LambdaLR or None): the scheduler steps once per optimizer update."""
        import torch

        opt = self.task.optimizer
        if isinstance(opt, Native):
            return opt.get("torch")(params, None), None
        a, optim = opt.resolved(), torch.optim
        fused = {"fused": True} if self.fused else {}
        if opt.name == "sgd":
            built = optim.SGD(params, lr=opt.lr, momentum=a["momentum"], nesterov=a["nesterov"], **fused)
        else:
            # capturable on XLA: step count and bias corrections stay on the device. On the host they reach
            # XLA as new scalars each step, and where one rounds to another scalar of the graph (steps 6212
            # and 16628 for the MLP) the step compiles again (bench/studies/xla_recompiles.py).
            kw = dict(lr=opt.lr, betas=(a["beta_1"], a["beta_2"]), eps=a["epsilon"], capturable=self.xla, **fused)
            built = (
                optim.AdamW(params, weight_decay=a["weight_decay"], **kw)
                if opt.name == "adamw"
                else optim.Adam(params, **kw)
            )
        s = self.task.schedule
        if s.name == "constant" and not s.warmup:
            return built, None
        factor = functools.partial(lr_factor, s, total_steps=self.total_steps, m=PY_MATH)
        return built, torch.optim.lr_scheduler.LambdaLR(built, factor)

    # --- loss and metrics ---------------------------------------------------------------------------
    def output_loss(self, output: str, y, pred):
        """One output's per-example loss, shape [batch]: averaged over its non-batch axes, in float32."""
        spec = self.task.losses()[output]
        if isinstance(spec, Native):
            value = self.native_loss(spec, y, pred, _is_tensor)
            if value.dim() == 0:  # a scalar batch mean (Native's contract): the same value for every example
                value = value.expand(pred.shape[0])
        else:
            value = _loss(canonical_loss(spec), y, pred)
        return value.float().reshape(value.shape[0], -1).mean(1)

    def batch_stats(self, y, pred):
        import torch

        out = self._stats(y, pred)
        return torch.stack(out) if out else torch.zeros(0, device=next(iter(self.named(pred).values())).device)

    def step_stats(self, loss, y, pred):
        """[mean loss, metric sums...] of one training batch, detached, as one tensor (the xla loop's step)."""
        import torch

        with torch.no_grad():
            return torch.stack([loss.detach(), *self._stats(y, pred)])

    def step_sums(self) -> "StepSums":
        """A window's running sums of step_stats, kept the way a careful user keeps them (StepSums)."""
        return StepSums(self)

    def _stats(self, y, pred, count=None) -> list:
        """[numerator, denominator] per metric, as 0-d float tensors; a denominator that is a count of elements
        as count(tensor) gives it (default: a cached device tensor, _count)."""
        count = count or _count
        preds, ys = self.named(pred), (y if isinstance(y, dict) else {"": y})
        out = []
        for output, _, spec in self.specs:
            if isinstance(spec, Native):
                value = spec.get("torch")(ys[output], preds[output])
                n = _count(preds[output].reshape(preds[output].shape[0], -1)[:, 0])
                if isinstance(value, (tuple, list)) and len(value) == 2:
                    out += [_metric_value(v, n, spec) for v in value]
                else:
                    out += [_metric_value(value, n, spec) * n, n]
            else:
                out += _metric(spec, ys[output], preds[output], count)
        return out

    def evaluator(self, module, device, sync=lambda: None):
        """evaluate(x, y) -> {"val_loss", "val_<metric>"...} over a prepared (cpu) test split, in batches; or
        evaluate(batches) over an iterable of prepared (x, y) batches (a streamed test split)."""
        import torch

        @torch.no_grad()
        def evaluate(x, y=None):
            module.eval()
            n, sums = 0, 0.0
            for xc, yc in test_batches(x, y, self.eval_batch):
                xb, yb = to_tensors(xc, device), to_tensors(yc, device)
                pred = module(xb)
                part = torch.cat([self.per_example_loss(yb, pred).sum().reshape(1), self.batch_stats(yb, pred)])
                sync()
                sums, n = sums + part.cpu().double().numpy(), n + num_items(yc)
            module.train()
            return self.results(sums, n, "val_")

        return evaluate

    # --- what was built -----------------------------------------------------------------------------
    def built(self, optimizer, scheduler, x_test) -> dict:
        d = optimizer.defaults
        betas = d.get("betas") or (None, None)
        args = {
            "beta_1": betas[0],
            "beta_2": betas[1],
            "epsilon": d.get("eps"),
            "weight_decay": d.get("weight_decay"),
            "momentum": d.get("momentum"),
            "nesterov": d.get("nesterov"),
        }
        base = float(d["lr"])

        def lr_at(step):
            return base * scheduler.lr_lambdas[0](step) if scheduler is not None else base

        report = built_report(
            self.task, type(optimizer).__name__, args, schedule_probe(lr_at, self.total_steps), x_test
        )
        return {
            **report,
            **({"optimizer_capturable": True} if d.get("capturable") else {}),
            **({"optimizer_fused": True} if d.get("fused") else {}),
            "optimizer_impl": optimizer_impl(optimizer),
        }


def optimizer_impl(optimizer) -> str:
    """How torch's optimizer runs its update (recorded; the parity report compares it): "fused" (one kernel per
    parameter group), "foreach" (one kernel per op over every tensor) or "per-tensor" (a loop of kernels per tensor:
    torch's default on the CPU). A recipe's own optimizer (Native) is described by what it set."""
    d = optimizer.defaults
    if d.get("fused"):
        return "fused"
    if d.get("foreach"):
        return "foreach"
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if d.get("foreach") is None and params and all(p.is_cuda for p in params):
        return "foreach"  # torch's default on CUDA
    return "per-tensor"


_COUNTS: dict = {}


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _metric_value(value, like, spec: Native):
    """A Native metric's batch mean or sum as a 0-d float32 tensor on `like`'s device: a tensor as it is, a
    Python or numpy number copied there (under XLA, a transfer each step rather than a new graph)."""
    import torch

    if _is_tensor(value):
        return value.float().reshape(()).to(like.device)  # a CPU tensor beside an XLA or CUDA one
    if is_number(value):
        return torch.tensor(float(value), dtype=torch.float32, device=like.device)
    raise NativeContractError(
        f"the recipe's custom metric {spec.describe('torch')} returned {returned(value)}: a metric returns the batch "
        "mean or a (numerator, denominator) pair, each a 0-d tensor or a number."
    )


def _count(t):
    """The number of elements of `t` as a float32 device tensor, made once per (size, device): a Python
    number would be copied to an XLA device every step, and a new count costs two ops every step."""
    import torch

    key = (t.numel(), str(t.device))
    if key not in _COUNTS:
        _COUNTS[key] = torch.full((), float(t.numel()), dtype=torch.float32, device=t.device)
    return _COUNTS[key]


def _like(pred, y):
    return pred.reshape(y.shape) if pred.dim() != y.dim() else pred


def _loss(name: str, y, pred):
    import torch.nn.functional as F

    if name == "sparse_categorical_crossentropy":
        return F.cross_entropy(pred.reshape(-1, pred.shape[-1]), y.reshape(-1).long(), reduction="none").reshape(
            pred.shape[:-1]
        )
    pred = _like(pred, y)
    y = y.to(pred.dtype)
    if name == "binary_crossentropy":  # from logits
        return F.binary_cross_entropy_with_logits(pred, y, reduction="none")
    return (pred - y).square() if name == "mean_squared_error" else (pred - y).abs()


def _metric(spec: Metric, y, pred, count=_count) -> list:
    import torch

    if spec.name in ("accuracy", "top_k_accuracy"):
        if pred.shape[-1] == 1 or spec.name == "accuracy" and pred.dim() == y.dim() and y.is_floating_point():
            hit = (pred.reshape(y.shape) > 0) == (y > 0.5)
            return [hit.sum(dtype=torch.float32), count(hit)]
        labels = y if y.dim() == 1 else y.reshape(-1)
        logits = pred if pred.dim() == 2 else pred.reshape(-1, pred.shape[-1])
        if spec.name == "accuracy":
            hit = logits.argmax(1) == labels
        else:
            hit = (logits.topk(spec.k, 1).indices == labels[:, None]).any(1)
        return [hit.sum(dtype=torch.float32), count(labels)]
    pred, y = _like(pred, y).float(), y.float()
    if spec.name in ("mean_absolute_error", "mean_squared_error"):
        err = (pred - y).abs() if spec.name == "mean_absolute_error" else (pred - y).square()
        return [err.sum(), count(err)]
    p, t = (pred > 0).float(), (y > 0.5).float()
    inter = (p * t).sum()
    if spec.name == "iou":
        return [inter, p.maximum(t).sum()]
    return [2.0 * inter, p.sum() + t.sum()]


class StepSums:
    """A window's running [sum of the steps' mean losses, metric numerators, denominators...], kept as a careful
    user keeps a running loss and accuracy: each figure added in place where it was computed (one add per figure
    per step, no stacked vector), a count of elements (a batch's size, known from its shape) as a Python number,
    and the usual single-output accuracy as the one line a user writes, `(logits.argmax(1) == y).sum()`. take()
    gives the window's sums as one float32 vector on the device, unread (the loop's one read), and starts the
    next window. Against one stacked vector per step through the general path, the fashion MLP's step ran 3-6%
    slower (bench/results.md, "The ladder")."""

    def __init__(self, task: TorchTask):
        self.task, self.sums, self.parts = task, None, None

    def add(self, loss, y, pred) -> None:
        import torch

        with torch.no_grad():
            if self.parts is None:
                self.parts = self._parts(y, pred)
            parts = self.parts(y, pred)
            if self.sums is None:  # the window's first step: its own copies, added to in place from here on (the
                # loss shares autograd's storage; a recipe's metric may return its own tensor, a count a cached one)
                self.sums = [loss.detach().clone(), *(p.clone() if _is_tensor(p) else p for p in parts)]
                return
            sums = self.sums
            sums[0] += loss.detach()
            for i, p in enumerate(parts, 1):
                sums[i] += p  # a tensor in place; a count as a number

    def _parts(self, y, pred):
        """parts(y, pred) -> the metrics' [numerator, denominator...] of one batch, for batches shaped as this one."""
        import torch

        specs = self.task.specs
        if (
            len(specs) == 1
            and isinstance(pred, torch.Tensor)
            and isinstance(y, torch.Tensor)
            and not isinstance(specs[0][2], Native)
            and specs[0][2].name == "accuracy"
            and pred.dim() == 2
            and y.dim() == 1
            and pred.shape[-1] > 1
            and not y.is_floating_point()
        ):
            # one output, class logits against labels: the line a user writes
            return lambda y, pred: ((pred.argmax(1) == y).sum(), y.shape[0])
        return lambda y, pred: self.task._stats(y, pred, _numel)

    def take(self):
        import torch

        sums, self.sums = self.sums, None
        device = sums[0].device
        return torch.stack([p.float() if _is_tensor(p) else torch.tensor(float(p), device=device) for p in sums])


def _numel(t) -> int:
    return t.numel()


BUILDER = TorchTask  # the part every framework has (raylab/registry.py PARTS)
