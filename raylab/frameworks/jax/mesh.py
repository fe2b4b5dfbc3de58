"""A jax trial's devices and where its arrays go: the global mesh over them (`global_mesh`), a batch sharded along it
and the state replicated (`Feed`)."""

from __future__ import annotations

import numpy as np


def global_mesh(short: str, asked: str):
    """(Mesh over the trial's devices along "batch", those devices): jax:none one local device, jax:dp every
    process's devices. `asked`: the device the trial was asked for (a GPU that jax does not see fails)."""
    import jax
    from jax.sharding import Mesh

    devices = jax.devices() if short == "dp" else jax.local_devices()[:1]
    if asked == "gpu" and devices[0].platform != "gpu":
        raise RuntimeError(
            f"--device gpu, but jax runs on {devices[0].platform} on this worker (a CPU-only jaxlib?); "
            "install jax[cuda12]==0.10.2 or use --device cpu."
        )
    return Mesh(np.array(devices), ("batch",)), devices


class Feed:
    """Where arrays go: a batch sharded along the mesh (each process gives its slice), the state replicated."""

    def __init__(self, mesh, world: int):
        from jax.sharding import NamedSharding, PartitionSpec

        self.world = world
        self.batch = NamedSharding(mesh, PartitionSpec("batch"))
        self.replicated = NamedSharding(mesh, PartitionSpec())

    def put(self, xy):
        """A batch (numpy, this process's slice) as global arrays; one process: numpy as it is (jit moves it)."""
        import jax

        if self.world == 1 and self.batch.mesh.size == 1:
            return xy
        return jax.tree.map(lambda a: jax.make_array_from_process_local_data(self.batch, a), xy)

    def replicate(self, tree):
        """Every leaf (a host value, the same on every process) as an array replicated over the mesh."""
        import jax

        if jax.process_count() == 1:
            return jax.tree.map(lambda a: jax.device_put(a, self.replicated), tree)

        def one(a):
            if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):  # a key: its data replicated, wrapped again
                return jax.random.wrap_key_data(one(jax.random.key_data(a)), impl=jax.random.key_impl(a))
            host = np.asarray(a)
            return jax.make_array_from_callback(host.shape, self.replicated, lambda index: host[index])

        return jax.tree.map(one, tree)
