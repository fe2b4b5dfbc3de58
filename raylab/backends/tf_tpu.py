"""tf:tpu: TPUStrategy over one TPU host's cores, in the shared TF loop (raylab/backends/tensorflow.py).

Placed through Ray's TPU resources (raylab/backends/tpu.py); without a TPU it stops before training,
or runs MirroredStrategy where --tpu-fallback mirrored allows it, recorded as actual_strategy=mirrored.
"""

from __future__ import annotations

from ray.train.backend import BackendConfig

from raylab.backends.base import Strategy
from raylab.backends.tf_worker import tf_worker_loop


def _tpu_preflight(cfg, cluster: dict) -> None:
    from raylab.backends.tpu import missing_tpu
    from raylab.errors import UserError

    why = missing_tpu(cfg.tpu_type, cluster)
    if why and cfg.tpu_fallback != "mirrored":
        raise UserError(f"tf:tpu: {why}; run on a TPU node or choose another strategy "
                        "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such).")
    if why:
        print(f"tf:tpu: {why}; --tpu-fallback mirrored: it will run MirroredStrategy, recorded as "
              "actual_strategy=mirrored.", flush=True)


def _tpu_resources(cfg, cluster: dict) -> dict:
    from raylab.backends.tpu import host_resources

    return host_resources(cfg.tpu_type, cluster)


# One worker on one TPU host; its replicas are that host's TPU cores (a pod slice: --tpu-type).
TPU = Strategy("tf:tpu", tf_worker_loop, lambda device: BackendConfig(), max_workers=1, preflight=_tpu_preflight,
               resources=_tpu_resources, replicas_found=True)
