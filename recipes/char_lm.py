"""A small causal transformer language model on bytes of text, in three frameworks: 137,216 parameters.

Token and position embeddings (256 byte values, 64 positions, width 64); two pre-LayerNorm blocks, each
x + Attention(LayerNorm(x)) then x + Dense(GELU(Dense(LayerNorm(x)))), 2 heads of causal self-attention and a 4x
MLP; a final LayerNorm and Dense(64, 256) to the next byte's logits. AdamW 2e-3 (weight decay 0.01), cosine schedule
after 100 warm-up steps, batch 64, 2 epochs; accuracy is the next byte's, over every position.

The three models are one model: attention is written out the same way in each (one Dense to queries, keys and
values; scores q.k / sqrt(32) with the future masked to -inf; softmax; one Dense out), GELU is the exact (erf) form
everywhere (Flax's `nnx.gelu` defaults to the tanh approximation), LayerNorm's epsilon is 1e-5, and every weight and
embedding starts N(0, 0.02), biases zero (the frameworks' defaults differ: docs/comparing.md). The built-in attention
layers and how they compare: docs/recipes.md, "Attention".

The data is the text of the Python standard library that runs the recipe (its top-level *.py files, sorted by name,
as bytes): 32,768 training and 4,096 test sequences of 65 bytes, each input its first 64 bytes and each target the
64 bytes after them. Token ids stay integers end to end: uint8 in memory and through Ray's object store, int32 in the
model (`preprocess=Cast("int32")`); the trial's `built_preprocess` tag shows the dtype the model was fed.

    python recipes/char_lm.py --quick                               # tf:none, torch:none, jax:none, a subset
    python recipes/char_lm.py --trials torch:none --threads 1       # one framework, the whole 2 epochs
"""

import numpy as np

from raylab import Cast, Recipe, Schedule, main, optimizer
from raylab.data import Dataset

VOCAB, SEQ, WIDTH, HEADS, EPS, STD = 256, 64, 64, 2, 1e-5, 0.02
HEAD = WIDTH // HEADS


def stdlib_text(n_train: int = 32768, n_test: int = 4096) -> Dataset:
    """Sequences of SEQ + 1 bytes of this Python's standard library source, cut one after another: the inputs their
    first SEQ bytes (uint8), the targets the SEQ bytes after them; the test split the sequences after the training
    split's."""
    import sysconfig
    from pathlib import Path

    root = Path(sysconfig.get_paths()["stdlib"])
    text = b"".join(path.read_bytes() for path in sorted(root.glob("*.py")))
    need = (n_train + n_test) * (SEQ + 1)
    if len(text) < need:
        raise SystemExit(f"{root} holds {len(text):,} bytes of *.py source; the recipe needs {need:,}.")
    seqs = np.frombuffer(text[:need], dtype=np.uint8).reshape(-1, SEQ + 1)
    x, y = seqs[:, :-1], seqs[:, 1:]
    return Dataset(
        "python-stdlib-bytes", x[:n_train], y[:n_train], x[n_train:], y[n_train:], source=f"{root}/*.py (bytes)"
    )


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras
        import keras
    import tensorflow as tf

    normal = keras.initializers.RandomNormal(stddev=STD)
    dense = dict(kernel_initializer=normal, bias_initializer="zeros")

    class Attention(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.qkv, self.out = keras.layers.Dense(3 * WIDTH, **dense), keras.layers.Dense(WIDTH, **dense)

        def call(self, x):
            n, t = tf.shape(x)[0], tf.shape(x)[1]
            q, k, v = tf.unstack(tf.transpose(tf.reshape(self.qkv(x), [n, t, 3, HEADS, HEAD]), [2, 0, 3, 1, 4]))
            scores = tf.matmul(q, k, transpose_b=True) * HEAD**-0.5
            causal = tf.linalg.band_part(tf.ones([t, t], scores.dtype), -1, 0) > 0
            scores = tf.where(causal, scores, tf.constant(-np.inf, scores.dtype))
            mixed = tf.transpose(tf.matmul(tf.nn.softmax(scores, -1), v), [0, 2, 1, 3])
            return self.out(tf.reshape(mixed, [n, t, WIDTH]))

    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.norm1 = keras.layers.LayerNormalization(epsilon=EPS)
            self.norm2 = keras.layers.LayerNormalization(epsilon=EPS)
            self.attention = Attention()
            self.up, self.down = keras.layers.Dense(4 * WIDTH, **dense), keras.layers.Dense(WIDTH, **dense)

        def call(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.down(tf.nn.gelu(self.up(self.norm2(x)), approximate=False))

    class Embed(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.token = keras.layers.Embedding(VOCAB, WIDTH, embeddings_initializer=normal)
            self.position = keras.layers.Embedding(SEQ, WIDTH, embeddings_initializer=normal)

        def call(self, ids):
            return self.token(ids) + self.position(tf.range(tf.shape(ids)[1]))

    ids = keras.Input((SEQ,), dtype="int32")
    x = Block()(Block()(Embed()(ids)))
    x = keras.layers.LayerNormalization(epsilon=EPS)(x)
    return keras.Model(ids, keras.layers.Dense(VOCAB, **dense)(x))


def torch_model():
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            n, t, _ = x.shape
            q, k, v = self.qkv(x).view(n, t, 3, HEADS, HEAD).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-2, -1)) * HEAD**-0.5
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            mixed = (scores.softmax(-1) @ v).transpose(1, 2)
            return self.out(mixed.reshape(n, t, WIDTH))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(WIDTH, eps=EPS), nn.LayerNorm(WIDTH, eps=EPS)
            self.attention = Attention()
            self.mlp = nn.Sequential(
                nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(approximate="none"), nn.Linear(4 * WIDTH, WIDTH)
            )

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.token, self.position = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
            self.blocks = nn.Sequential(Block(), Block())
            self.norm, self.head = nn.LayerNorm(WIDTH, eps=EPS), nn.Linear(WIDTH, VOCAB)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.head(self.norm(self.blocks(self.token(ids) + self.position(positions))))

    model = CharLM()
    for layer in model.modules():
        if isinstance(layer, (nn.Linear, nn.Embedding)):  # torch's defaults: Kaiming-uniform(a=sqrt(5)), N(0, 1)
            nn.init.normal_(layer.weight, std=STD)
        if isinstance(layer, nn.Linear):
            nn.init.zeros_(layer.bias)
    return model


def jax_model(rngs):
    """A Flax NNX module; `rngs` (an nnx.Rngs) draws its parameters."""
    import jax.numpy as jnp
    from flax import nnx

    normal = nnx.initializers.normal(STD)
    dense = dict(kernel_init=normal, bias_init=nnx.initializers.zeros_init(), rngs=rngs)

    class Attention(nnx.Module):
        def __init__(self):
            self.qkv, self.out = nnx.Linear(WIDTH, 3 * WIDTH, **dense), nnx.Linear(WIDTH, WIDTH, **dense)

        def __call__(self, x):
            n, t, _ = x.shape
            q, k, v = self.qkv(x).reshape(n, t, 3, HEADS, HEAD).transpose(2, 0, 3, 1, 4)
            scores = (q @ k.swapaxes(-2, -1)) * HEAD**-0.5
            scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
            mixed = (nnx.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3)
            return self.out(mixed.reshape(n, t, WIDTH))

    class Block(nnx.Module):
        def __init__(self):
            self.norm1 = nnx.LayerNorm(WIDTH, epsilon=EPS, rngs=rngs)
            self.norm2 = nnx.LayerNorm(WIDTH, epsilon=EPS, rngs=rngs)
            self.attention = Attention()
            self.up, self.down = nnx.Linear(WIDTH, 4 * WIDTH, **dense), nnx.Linear(4 * WIDTH, WIDTH, **dense)

        def __call__(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.down(nnx.gelu(self.up(self.norm2(x)), approximate=False))

    class CharLM(nnx.Module):
        def __init__(self):  # blocks as named attributes (Flax 0.12 rejects a plain list of modules)
            self.token = nnx.Embed(VOCAB, WIDTH, embedding_init=normal, rngs=rngs)
            self.position = nnx.Embed(SEQ, WIDTH, embedding_init=normal, rngs=rngs)
            self.block1, self.block2 = Block(), Block()
            self.norm, self.head = nnx.LayerNorm(WIDTH, epsilon=EPS, rngs=rngs), nnx.Linear(WIDTH, VOCAB, **dense)

        def __call__(self, ids):
            x = self.token(ids) + self.position(jnp.arange(ids.shape[1]))
            return self.head(self.norm(self.block2(self.block1(x))))

    return CharLM()


RECIPE = Recipe(
    name="char_lm",
    data=stdlib_text,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    loss="sparse_categorical_crossentropy",  # from logits, at every position
    metrics=("accuracy",),
    optimizer=optimizer("adamw", 2e-3, weight_decay=0.01),
    schedule=Schedule("cosine", warmup=100),
    preprocess=Cast("int32"),  # byte ids stay integers: an embedding looks them up
    batch_per_replica=64,
    epochs=2,
    default_trials=("tf:none", "torch:none", "jax:none"),
    default_workers=(1,),
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
