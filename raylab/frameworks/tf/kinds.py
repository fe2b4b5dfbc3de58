"""TensorFlow's trial kinds: the default strategy, MirroredStrategy, MultiWorkerMirroredStrategy, TPUStrategy
(tf:tpu) and ParameterServerStrategy (tf:ps, raylab/frameworks/tf/ps.py).

One training loop for every synchronous TF strategy (raylab/frameworks/tf/worker.py), so the strategy is the
only thing that differs between TF trials. It is a Keras 3 model driven by a custom loop with `strategy.run`:
Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras#20585, ray#47464), and of the
two working options the custom loop measured ~10.5 ms/step against ~21 ms/step
for tf-keras `fit` (MLP, 2 workers x 1 thread, on the 2-core development VM), so the custom loop wins.

Ray Train's own TensorflowConfig would do for TF_CONFIG, but importing ray.train.tensorflow
imports TensorFlow on the driver (5 s, and torch trials would pay it too) and it forces
TF_USE_LEGACY_KERAS=1; the few lines below wire TF_CONFIG without either. This module is the
driver's side (the backend and the strategies); what each worker runs is in worker.py and ps.py.

tf:tpu is placed through Ray's TPU resources (raylab/tpu.py); without a TPU it stops before training,
or runs MirroredStrategy where --tpu-fallback mirrored allows it, recorded as actual_strategy=mirrored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ray.train.backend import Backend, BackendConfig

from raylab.frameworks.rendezvous import every_address
from raylab.frameworks.tf.ps import tf_ps_loop
from raylab.frameworks.tf.worker import tf_worker_loop
from raylab.loop.worker_config import new_group, set_group
from raylab.registry import PS_NO_BF16, Strategy, always


def _set_tf_config(workers: list[str], index: int) -> None:
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def _set_tf_config_roles(cluster: dict, role: str, index: int, group: str) -> None:
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})
    set_group(group)  # its servers wait on its own chief


def ps_roles(addresses: list[str], ps: int) -> tuple[dict, list[tuple[str, int]]]:
    """The one cluster dict of a tf:ps trial and each rank's task: rank 0 chief, then ps, then workers."""
    cluster = {"chief": addresses[:1], "ps": addresses[1 : 1 + ps], "worker": addresses[1 + ps :]}
    tasks = [("chief", 0)] + [("ps", i) for i in range(ps)] + [("worker", i) for i in range(len(addresses) - 1 - ps)]
    return cluster, tasks


class _MultiWorkerBackend(Backend):
    def on_start(self, worker_group, backend_config):
        import ray

        addresses = every_address(worker_group)  # each worker's gRPC server
        if backend_config.ps:
            cluster, tasks = ps_roles(addresses, backend_config.ps)
            group = new_group()
            ray.get(
                [
                    worker_group.execute_single_async(
                        i, _set_tf_config_roles, cluster=cluster, role=role, index=k, group=group
                    )
                    for i, (role, k) in enumerate(tasks)
                ]
            )
            return
        ray.get(
            [
                worker_group.execute_single_async(i, _set_tf_config, workers=addresses, index=i)
                for i in range(len(worker_group))
            ]
        )


@dataclass
class MultiWorkerConfig(BackendConfig):
    """Writes TF_CONFIG before the loop starts: one `worker` task per Ray worker, or chief/ps/worker roles."""

    ps: int = 0  # parameter servers: 0 for MultiWorkerMirroredStrategy

    @property
    def backend_cls(self):
        return _MultiWorkerBackend


def _tpu_preflight(cfg, cluster: dict) -> None:
    from raylab.errors import UserError
    from raylab.tpu import missing_tpu

    why = missing_tpu(cfg.tpu_type, cluster)
    if why and cfg.tpu_fallback != "mirrored":
        raise UserError(
            f"tf:tpu: {why}; run on a TPU node or choose another strategy "
            "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such)."
        )
    if why:
        print(
            f"tf:tpu: {why}; --tpu-fallback mirrored: it will run MirroredStrategy, recorded as "
            "actual_strategy=mirrored.",
            flush=True,
        )


def _tpu_resources(cfg, cluster: dict) -> dict:
    from raylab.tpu import host_resources

    return host_resources(cfg.tpu_type, cluster)


def _cpu_env(backend, cfg) -> dict:
    """What ran is what's recorded: no GPU may sneak into a CPU trial (TF takes every GPU it sees at import)."""
    return {"CUDA_VISIBLE_DEVICES": ""} if cfg.device == "cpu" else {}


def _no_gpu(backend, cfg) -> dict:
    return {"CUDA_VISIBLE_DEVICES": ""}  # tf:ps runs on CPUs


# --compile: each window's steps in a tf.function (a graph, as Keras runs them), or that step also compiled by XLA
# (jit_compile=True, set explicitly: Keras' "auto" turns XLA off on CPUs and under tf.distribute). XLA has no modes
# of its own: every mode of --compile on is XLA.
_XLA = {**always("xla"), "off": "tf.function"}
_GRAPH = {"off": "tf.function"}  # no XLA step in raylab (raylab/frameworks/tf/compiled.py says why)
_SYNC = dict(worker_env=_cpu_env, batch_search=True)  # what the synchronous kinds share
NONE = Strategy(
    "tf:none", tf_worker_loop, lambda device: BackendConfig(), max_workers=1, fp16=None, executions=_XLA, **_SYNC
)
MIRRORED = Strategy(
    "tf:mirrored",
    tf_worker_loop,
    lambda device: BackendConfig(),
    in_one_process=True,
    fp16=None,
    executions=_GRAPH,
    **_SYNC,
)
MWMS = Strategy(
    "tf:mwms",
    tf_worker_loop,
    lambda device: MultiWorkerConfig(),
    fp16=None,
    executions=_GRAPH,
    cold="TensorFlow's collectives and TF_CONFIG are fixed for a process's life",
    **_SYNC,
)
# One worker on one TPU host; its replicas are that host's TPU cores (a pod slice: --tpu-type).
TPU = Strategy(
    "tf:tpu",
    tf_worker_loop,
    lambda device: BackendConfig(),
    max_workers=1,
    preflight=_tpu_preflight,
    resources=_tpu_resources,
    replicas_found=True,
    device_of=lambda cfg: "tpu",
    fp16="TPUs have no float16 arithmetic (they run bf16)",
    executions=always("xla"),
    cold="a TPU system is initialized once per process",
    **_SYNC,
)
PS = Strategy(
    "tf:ps",
    tf_ps_loop,
    lambda device: MultiWorkerConfig(),
    ps_roles="chief",
    bf16=PS_NO_BF16,
    fp16=PS_NO_BF16,
    worker_env=_no_gpu,
    executions=_GRAPH,
    cold="its servers' TF_CONFIG and collectives are fixed for a process's life, and a server never returns",
)

KINDS = {"none": NONE, "mirrored": MIRRORED, "mwms": MWMS, "tpu": TPU, "ps": PS}
