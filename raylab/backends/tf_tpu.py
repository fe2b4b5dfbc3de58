"""tf:tpu: TPUStrategy over one TPU host's cores, in the shared TF loop (raylab/backends/tensorflow.py).

Placed through Ray's TPU resources (raylab/backends/tpu.py); without a TPU it stops before training,
or runs MirroredStrategy where --tpu-fallback mirrored allows it, recorded as actual_strategy=mirrored.
"""

from __future__ import annotations

import socket

from ray.train.backend import BackendConfig

from raylab.backends.base import Strategy
from raylab.backends.tensorflow import tf_worker_loop


def tpu_strategy(tf, fallback: str):
    """TPUStrategy over this host's TPU cores; if none is found, MirroredStrategy when the user allowed it.

    Returns (strategy, why the fallback happened or None). Ray must have given this worker TPU
    chips; then the resolver finds the host's TPU ("local": a TPU VM) and the system is initialised.
    """
    import ray

    try:
        if not ray.get_runtime_context().get_accelerator_ids().get("TPU"):
            raise RuntimeError("Ray assigned this worker no TPU chips")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver), None
    except Exception as e:  # noqa: BLE001 - every way of not finding a TPU ends the same way
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        reason = f"no TPU on {socket.gethostname()} ({first})"
        if fallback != "mirrored":
            raise RuntimeError(f"{reason}; run tf:tpu on a TPU node or choose another strategy "
                               "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such).") from None
        return tf.distribute.MirroredStrategy(), reason


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
