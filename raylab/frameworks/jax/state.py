"""A jax trial's train state (parameters, the rest of the model's state, optimizer state) as its worker keeps it: split
from the recipe's Flax NNX model (`split`, as the plain script splits it too), held for the step that donates it
(`StateHolder`), summed to compare replicas (`checksum`), and checkpointed as numpy with its PRNG keys kept as keys
(`jax_saver`)."""

from __future__ import annotations

import os
import pickle

import numpy as np


def split(model) -> tuple:
    """The model as a jax step takes it: (its graph in training mode, its parameters, the rest of its state, its graph
    in evaluation mode)."""
    from flax import nnx

    model.train()
    graph, params, rest = nnx.split(model, nnx.Param, ...)
    model.eval()
    return graph, params, rest, nnx.split(model, nnx.Param, ...)[0]


class StateHolder:
    """The train state (parameters, rest, optimizer state): the step donates it and the holder keeps the new one."""

    def __init__(self, state):
        self.state = state


def local_copy(tree):
    """This process's copy of a replicated tree (its first device's)."""
    import jax

    return jax.tree.map(lambda a: a.addressable_data(0), tree)


def checksum(state) -> float:
    """Sum of |parameters and batch statistics|: equal on every replica that holds the same model."""
    import jax
    import jax.numpy as jnp

    params, rest, _ = local_copy(state)
    leaves = [a for a in jax.tree.leaves((params, rest)) if jnp.issubdtype(a.dtype, jnp.floating)]
    return float(sum(np.abs(np.asarray(a, np.float64)).sum() for a in leaves))


class SavedKey:
    """A PRNG key array in a checkpoint: its key data and its implementation's name."""

    def __init__(self, data, impl: str):
        self.data, self.impl = data, impl


def to_host(tree):
    """The state as numpy (PRNG keys as SavedKey), for a checkpoint."""
    import jax

    def one(a):
        a = a.addressable_data(0) if hasattr(a, "addressable_data") else a
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            return SavedKey(np.asarray(jax.random.key_data(a)), str(jax.random.key_impl(a)))
        return np.asarray(a)

    return jax.tree.map(one, tree)


def from_host(tree, like):
    """A checkpoint's state with its keys made keys again (of `like`'s implementations)."""
    import jax

    def one(saved, old):
        return (
            jax.random.wrap_key_data(saved.data, impl=jax.random.key_impl(old))
            if isinstance(saved, SavedKey)
            else saved
        )

    return jax.tree.map(one, tree, like, is_leaf=lambda v: isinstance(v, SavedKey))


def jax_saver(holder: StateHolder, feed):  # feed: jax/mesh.py's Feed
    """Checkpoints as a pickle of the state's numpy arrays (parameters, batch statistics, dropout keys, optimizer
    state): rank 0 writes, every rank loads it and replicates it again (every process holds the same state)."""
    from raylab.loop.checkpoint import Saver

    def save(directory: str, rank: int) -> None:
        host = to_host(holder.state)  # every rank reads its own copy: nothing waits on another process
        if rank == 0:
            with open(os.path.join(directory, "jax_state.pkl"), "wb") as f:
                pickle.dump(host, f)

    def load(directory: str) -> None:
        with open(os.path.join(directory, "jax_state.pkl"), "rb") as f:
            saved = pickle.load(f)
        holder.state = feed.replicate(from_host(saved, local_copy(holder.state)))

    return Saver(save, load)
