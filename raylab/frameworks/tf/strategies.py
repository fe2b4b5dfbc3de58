"""The distribution strategy a TF worker builds for its trial kind: MirroredStrategy over its local replicas,
MultiWorkerMirrored across workers, or a TPUStrategy over the TPU it finds (--tpu-fallback: Mirrored where none)."""

from __future__ import annotations

import socket


def _build_strategy(tf, name: str, local_replicas: int, device: str):
    if name == "none":
        return tf.distribute.get_strategy()
    if name == "mwms":
        ring = tf.distribute.experimental.CommunicationImplementation.RING
        nccl = tf.distribute.experimental.CommunicationImplementation.NCCL
        options = tf.distribute.experimental.CommunicationOptions(implementation=nccl if device == "gpu" else ring)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if device == "gpu":
        return tf.distribute.MirroredStrategy()
    # On CPU, MirroredStrategy sees one device: split it into one logical CPU per replica. One replica is the CPU
    # itself, left as it is: a warm process that ran tf:none has its devices fixed (TF refuses a new split).
    if local_replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * local_replicas)
    return tf.distribute.MirroredStrategy(devices=[f"/cpu:{i}" for i in range(local_replicas)])


def strategy_for(tf, cfg, local_replicas: int):
    """(strategy, the strategy that ran, fallback facts)."""
    if cfg.short != "tpu":
        return _build_strategy(tf, cfg.short, local_replicas, cfg.device), cfg.short, {}
    dist, reason = tpu_strategy(tf, cfg.tpu_fallback)
    return (dist, "mirrored", {"fallback_reason": reason}) if reason else (dist, "tpu", {})


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
            raise RuntimeError(
                f"{reason}; run tf:tpu on a TPU node or choose another strategy "
                "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such)."
            ) from None
        return tf.distribute.MirroredStrategy(), reason
