"""Convolution micro-benchmark: 128 random 256x256x3 images, 256 5x5 kernels, stride 2, SAME padding.

One iteration is one forward convolution (80 GFLOP at batch 128), run in TensorFlow, PyTorch,
PyTorch/XLA and JAX on synthetic seeded inputs, each trial in a fresh Ray worker process with the
threads it is given; the first iteration (tracing, XLA compilation) is kept apart, the rest
timed. With --repeats the comparison shows the spread and what is not distinguishable.

    python recipes/conv_bench.py                                  # tf, torch, xla, jax: 2 warm-up + 10 timed
    python recipes/conv_bench.py --repeats 3 --threads 2
    python recipes/conv_bench.py --quick                          # batch 8, smoke run
"""

from raylab import StepBench, main

IMAGE, CHANNELS, FILTERS, KERNEL, STRIDE = 256, 3, 256, 5, 2


def tf_conv(ctx):
    import tensorflow as tf

    gen = tf.random.Generator.from_seed(ctx.seed)
    x = gen.uniform((ctx.batch, IMAGE, IMAGE, CHANNELS))
    k = gen.uniform((KERNEL, KERNEL, CHANNELS, FILTERS))

    @tf.function
    def conv():
        return tf.nn.conv2d(x, k, strides=STRIDE, padding="SAME")[0, 0, 0, 0]  # one value back: the op completes

    return (lambda: conv().numpy()), {"output_shape": f"{ctx.batch}x{IMAGE // STRIDE}x{IMAGE // STRIDE}x{FILTERS}"}


def torch_conv(ctx):
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.rand(ctx.batch, CHANNELS, IMAGE, IMAGE, generator=gen).to(ctx.device)  # NCHW, torch's layout
    k = torch.rand(FILTERS, CHANNELS, KERNEL, KERNEL, generator=gen).to(ctx.device)
    # TF's SAME at stride 2: output ceil(256/2) = 128, padding 3 split 1 before, 2 after (torch pads evenly).
    pad = max((IMAGE // STRIDE - 1) * STRIDE + KERNEL - IMAGE, 0)
    sides = (pad // 2, pad - pad // 2) * 2

    def conv():
        out = F.conv2d(F.pad(x, sides), k, stride=STRIDE)
        ctx.sync()  # XLA: run the graph and wait; eager CPU has already finished
        return out

    return conv, {"output_shape": f"{ctx.batch}x{FILTERS}x{IMAGE // STRIDE}x{IMAGE // STRIDE}"}


def jax_conv(ctx):
    import jax

    kx, kk = jax.random.split(jax.random.key(ctx.seed))
    x = jax.device_put(jax.random.uniform(kx, (ctx.batch, IMAGE, IMAGE, CHANNELS)), ctx.device)  # NHWC, as TF
    k = jax.device_put(jax.random.uniform(kk, (KERNEL, KERNEL, CHANNELS, FILTERS)), ctx.device)

    @jax.jit
    def conv(x, k):  # XLA's SAME at stride 2 pads as TF's
        return jax.lax.conv_general_dilated(
            x, k, (STRIDE, STRIDE), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), precision="highest"
        )

    return (lambda: conv(x, k).block_until_ready()), {
        "output_shape": f"{ctx.batch}x{IMAGE // STRIDE}x{IMAGE // STRIDE}x{FILTERS}"
    }


BENCH = StepBench(
    name="conv_bench",
    builders={"tf": tf_conv, "torch": torch_conv, "jax": jax_conv},
    batch=128,
    iterations=10,
    warmup=2,
    quick_batch=8,
    what="convolution",
    doc=__doc__,
)

if __name__ == "__main__":
    main(BENCH)
