"""fp16's dynamic loss scale in tf:none, tf:mirrored and tf:mwms: Keras' LossScaleOptimizer, with a finite check
that every replica agrees on.

Keras 3's LossScaleOptimizer checks that the gradients are finite before they are all-reduced: under
MultiWorkerMirroredStrategy on each replica's own gradients (its `_common_apply`), under MirroredStrategy on the
first replica's (its merge_call). Under tf:mwms a non-finite gradient on one worker makes it skip a step the
others take, and the job hangs in the next all-reduce (seen in tests/integration/test_fp16.py without this
check); under tf:mirrored another replica's non-finite gradient is not seen and is applied. Here each replica's "not
finite" is summed across replicas (one scalar all-reduce per step) before
the decision, so every replica skips the same steps. The optimizer also counts the skipped steps.
"""

from __future__ import annotations


def loss_scale_optimizer(keras, tf, inner):
    """`inner` wrapped in a LossScaleOptimizer whose finite check is cross-replica (Keras' defaults: initial
    scale 2**15, doubled after 2,000 finite steps, halved after a non-finite one)."""

    class CrossReplicaLossScale(keras.optimizers.LossScaleOptimizer):
        def build(self, var_list):
            self.skipped_steps = self.add_variable(
                shape=(), dtype="float32", initializer="zeros", aggregation="none", name="skipped_steps"
            )
            super().build(var_list)

        def check_finite(self, grads):
            finite = super().check_finite(grads)
            ctx = tf.distribute.get_replica_context()
            if ctx is None or ctx.num_replicas_in_sync == 1:
                return finite
            not_finite = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(finite), tf.float32))
            return tf.equal(not_finite, 0.0)

        def _stateful_handle_non_finite_grads(self):
            self.skipped_steps.assign_add(1.0)
            super()._stateful_handle_non_finite_grads()

    return CrossReplicaLossScale(inner)


def figures(optimizer):
    """Training.extra(), read at the end: the final loss scale and how many steps were skipped."""
    return lambda: {
        "loss_scale": float(optimizer.dynamic_scale.numpy()),
        "skipped_steps": int(optimizer.skipped_steps.numpy()),
    }
