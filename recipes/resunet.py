"""ResNet-UNet training-step benchmark: ~30M parameters, 96x96x3 inputs, a mask head and a depth head.

The seed trained a ResNet-UNet with PyTorch/XLA on 8 TPU cores; this recipe times its training step
(forward, mask BCE + depth L1 loss, backward, Adam 1e-4) in TensorFlow, PyTorch, PyTorch/XLA and JAX on
synthetic seeded images and targets: throughput and compile time, no accuracy. The model
(raylab/models/resunet.py) has 29,539,970 trainable parameters in every framework. --precision bf16
autocasts on CUDA (torch, `--device gpu`), on XLA TPU and in JAX on a GPU or TPU; elsewhere fp32 runs and is
recorded.

    python recipes/resunet.py                                   # batch 8: 2 warm-up + 5 timed steps each
    python recipes/resunet.py --trials torch:none,xla:single --repeats 3
    python recipes/resunet.py --quick                           # batch 1, smoke run
"""

from raylab import StepBench, main

SIZE, LR = 96, 1e-4


def tf_step(ctx):
    import keras
    import tensorflow as tf

    from raylab.models.resunet import tf_model

    keras.utils.set_random_seed(ctx.seed)
    gen = tf.random.Generator.from_seed(ctx.seed)
    x = gen.uniform((ctx.batch, SIZE, SIZE, 3))
    mask = tf.cast(gen.uniform((ctx.batch, SIZE, SIZE, 1)) > 0.5, tf.float32)
    depth = gen.uniform((ctx.batch, SIZE, SIZE, 1))
    model = tf_model()
    optimizer = keras.optimizers.Adam(learning_rate=LR)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            mask_logits, depth_pred = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(mask, mask_logits)) + tf.reduce_mean(
                tf.abs(depth_pred - depth)
            )
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    params = int(sum(int(tf.size(w)) for w in model.trainable_weights))
    return (lambda: float(step())), {"parameters": params}


def torch_step(ctx):
    import torch
    import torch.nn.functional as F

    from raylab.models.resunet import torch_model

    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.rand(ctx.batch, SIZE, SIZE, 3, generator=gen).to(ctx.device)
    mask = (torch.rand(ctx.batch, SIZE, SIZE, 1, generator=gen) > 0.5).float().to(ctx.device)
    depth = torch.rand(ctx.batch, SIZE, SIZE, 1, generator=gen).to(ctx.device)
    model = torch_model().to(ctx.device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, eps=1e-7)
    autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=ctx.bf16)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            mask_logits, depth_pred = model(x)
            loss = F.binary_cross_entropy_with_logits(mask_logits, mask) + (depth_pred - depth).abs().mean()
        loss.backward()
        optimizer.step()
        ctx.sync()  # XLA: run the step's graph and wait
        return loss.item()

    return step, {"parameters": sum(p.numel() for p in model.parameters())}


def jax_step(ctx):
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from raylab.models.resunet import jax_model

    kx, km, kd = jax.random.split(jax.random.key(ctx.seed), 3)
    x = jax.random.uniform(kx, (ctx.batch, SIZE, SIZE, 3))
    mask = (jax.random.uniform(km, (ctx.batch, SIZE, SIZE, 1)) > 0.5).astype(jnp.float32)
    depth = jax.random.uniform(kd, (ctx.batch, SIZE, SIZE, 1))
    model = jax_model(nnx.Rngs(ctx.seed))
    graph, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optax.adam(LR, eps=1e-7)
    state = (params, rest, tx.init(params))
    low = jnp.bfloat16 if ctx.bf16 else jnp.float32

    def loss_fn(m):
        g, p, r = nnx.split(m, nnx.Param, ...)
        run = nnx.merge(g, jax.tree.map(lambda a: a.astype(low), p), r)  # bf16: a bfloat16 copy runs the pass
        mask_logits, depth_pred = (o.astype(jnp.float32) for o in run(x.astype(low)))
        nnx.update(m, jax.tree.map(lambda n, o: n.astype(o.dtype), nnx.state(run, nnx.Not(nnx.Param)), r))
        return optax.sigmoid_binary_cross_entropy(mask_logits, mask).mean() + jnp.abs(depth_pred - depth).mean()

    @jax.jit
    def step(state):
        params, rest, opt = state
        m = nnx.merge(graph, params, rest)
        loss, grads = nnx.value_and_grad(loss_fn)(m)
        updates, opt = tx.update(grads, opt, params)
        return (optax.apply_updates(params, updates), nnx.split(m, nnx.Param, ...)[2], opt), loss

    def once():
        nonlocal state
        state, loss = step(state)
        return float(loss)

    return once, {"parameters": int(sum(p.size for p in jax.tree.leaves(params)))}


BENCH = StepBench(
    name="resunet",
    builders={"tf": tf_step, "torch": torch_step, "jax": jax_step},
    batch=8,
    iterations=5,
    warmup=2,
    quick_batch=1,
    quick_iterations=1,
    what="training step",
    doc=__doc__,
)

if __name__ == "__main__":
    main(BENCH)
