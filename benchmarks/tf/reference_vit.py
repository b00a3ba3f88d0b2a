"""A TensorFlow/Keras re-implementation of the reference text's tiny Vision Transformer.

It exists only so that ``benchmarks/compare_reference.py`` can compare training
throughput (images per second: forward + backward + optimiser update) against the
JAX/Equinox package ``transformer_intro``.  The architecture follows the reference
faithfully, including its quirks:

* self-attention has no value projection: ``out = A^T @ x``, with the softmax taken
  over the *keys* (axis 1 of ``k @ q^T``, so columns sum to one);
* the heads of multi-head attention are each projected back to ``token_dim`` and then
  *averaged*, not concatenated;
* the class token is prepended *after* the position embeddings are added.

One deliberate difference (a bug fix): in the reference the position embedding was a
bare ``tf.Variable`` attribute, which Keras 3 does not track, so it was never trained.
Here it, and the class token, are created with ``self.add_weight`` so that they are.

Public functions: ``build_reference_model``, ``count_params``, ``make_train_step``,
``random_batch``, ``measure_throughput`` and ``sanity_check``.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # silence TensorFlow's C++ log lines

import argparse
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

# The "reference" hyperparameters.
REFERENCE = dict(
    image_shape=(28, 28, 1),
    patch_size=4,
    token_dim=128,
    num_heads=8,
    num_blocks=8,
    mlp_hidden=128,
    mlp_layers=1,
    num_classes=10,
)


def _init():
    return keras.initializers.GlorotNormal()


class SelfAttention(keras.layers.Layer):
    """Single head: keys and queries only (no value projection), GELU-activated."""

    def __init__(self, projection_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.projection_dim = projection_dim
        self.Uk = keras.layers.Dense(
            projection_dim, activation="gelu", use_bias=False, kernel_initializer=_init()
        )
        self.Uq = keras.layers.Dense(
            projection_dim, activation="gelu", use_bias=False, kernel_initializer=_init()
        )

    def call(self, x):  # x: (B, N, D)
        k = self.Uk(x)  # (B, N, P)
        q = self.Uq(x)  # (B, N, P)
        dot = tf.matmul(k, q, transpose_b=True) / tf.sqrt(float(self.projection_dim))  # (B, N, N)
        weights = tf.nn.softmax(dot, axis=1)  # over keys: each column sums to one
        return tf.matmul(weights, x, transpose_a=True)  # A^T @ x: (B, N, D)


class MultiHeadSelfAttention(keras.layers.Layer):
    """Per head: SelfAttention then Dense(token_dim); the heads are averaged."""

    def __init__(
        self, token_dim: int, projection_dim: int | None = None, num_heads: int = 1, **kwargs
    ):
        super().__init__(**kwargs)
        projection_dim = token_dim if projection_dim is None else projection_dim
        self.heads = [SelfAttention(projection_dim) for _ in range(num_heads)]
        self.outs = [
            keras.layers.Dense(token_dim, use_bias=False, kernel_initializer=_init())
            for _ in range(num_heads)
        ]

    def call(self, x):
        stacked = tf.stack([out(head(x)) for head, out in zip(self.heads, self.outs)], axis=0)
        return tf.reduce_mean(stacked, axis=0)  # (B, N, token_dim)


class MLP(keras.layers.Layer):
    """Dense layers of widths [num_hidden] * num_layers + [num_output], GELU in between."""

    def __init__(self, num_hidden: int, num_layers: int, num_output: int, **kwargs):
        super().__init__(**kwargs)
        widths = [num_hidden] * num_layers + [num_output]
        self.layers_ = [
            keras.layers.Dense(w, use_bias=True, kernel_initializer=_init()) for w in widths
        ]

    def call(self, x):
        for layer in self.layers_[:-1]:
            x = tf.nn.gelu(layer(x), approximate=False)  # same GELU as activation="gelu"
        return self.layers_[-1](x)


class TransformerBlock(keras.layers.Layer):
    """Pre-norm block: x + mhsa(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, token_dim: int, num_heads: int, mlp_hidden: int, mlp_layers: int, **kwargs):
        super().__init__(**kwargs)
        self.ln1 = keras.layers.LayerNormalization(axis=2)
        self.ln2 = keras.layers.LayerNormalization(axis=2)
        self.mhsa = MultiHeadSelfAttention(token_dim, token_dim, num_heads)
        self.mlp = MLP(num_hidden=mlp_hidden, num_layers=mlp_layers, num_output=token_dim)

    def call(self, x):
        x = x + self.mhsa(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ImageTokeniser(keras.layers.Layer):
    """Non-overlapping patches via a strided convolution, reshaped to (B, N, D)."""

    def __init__(self, token_dim: int, patch_size: int, **kwargs):
        super().__init__(**kwargs)
        self.token_dim = token_dim
        self.conv = keras.layers.Conv2D(
            filters=token_dim,
            kernel_size=patch_size,
            strides=patch_size,
            padding="valid",
            data_format="channels_last",
            kernel_initializer=_init(),
        )

    def call(self, images):  # (B, H, W, C)
        x = self.conv(images)  # (B, H/p, W/p, D)
        return tf.reshape(x, (tf.shape(x)[0], -1, self.token_dim))


class PositionEmbedding(keras.layers.Layer):
    """Learned (N, D) position embeddings, added to the tokens."""

    def __init__(self, num_tokens: int, token_dim: int, **kwargs):
        super().__init__(**kwargs)
        # FIX: the reference stored a bare tf.Variable here; Keras 3 does not track such
        # attributes, so the embedding was never trained.  add_weight makes it trainable.
        self.embedding = self.add_weight(
            shape=(num_tokens, token_dim),
            initializer=keras.initializers.RandomNormal(),
            trainable=True,
            name="position_embedding",
        )

    def call(self, x):
        return x + self.embedding


class TinyVisionTransformer(keras.Model):
    def __init__(
        self,
        image_shape=(28, 28, 1),
        patch_size=4,
        token_dim=128,
        num_heads=8,
        num_blocks=8,
        mlp_hidden=128,
        mlp_layers=1,
        num_classes=10,
        **kwargs,
    ):
        super().__init__(**kwargs)
        height, width, _ = image_shape
        num_tokens = (height // patch_size) * (width // patch_size)
        self.tokeniser = ImageTokeniser(token_dim, patch_size)
        self.position = PositionEmbedding(num_tokens, token_dim)
        # FIX (as for the position embedding): add_weight, not a bare tf.Variable, so that
        # the class token is tracked and trained.
        self.class_token = self.add_weight(
            shape=(1, 1, token_dim), initializer="zeros", trainable=True, name="class_token"
        )
        self.blocks = [
            TransformerBlock(token_dim, num_heads, mlp_hidden, mlp_layers)
            for _ in range(num_blocks)
        ]
        self.head = MLP(num_hidden=mlp_hidden, num_layers=mlp_layers, num_output=num_classes)

    def call(self, images):
        x = self.position(self.tokeniser(images))  # (B, N, D)
        cls = tf.tile(tf.cast(self.class_token, x.dtype), [tf.shape(x)[0], 1, 1])
        x = tf.concat([cls, x], axis=1)  # (B, N + 1, D)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x[:, 0])  # class token only: (B, num_classes)
        return logits - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)  # log-softmax


def build_reference_model(seed: int = 0, **overrides) -> TinyVisionTransformer:
    """The reference-sized model, built (weights created) by one call on zeros."""
    keras.utils.set_random_seed(seed)
    config = {**REFERENCE, **overrides}
    model = TinyVisionTransformer(**config)
    model(tf.zeros((1, *config["image_shape"])))
    return model


def count_params(model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def expected_param_count(
    image_shape=(28, 28, 1),
    patch_size=4,
    token_dim=128,
    num_heads=8,
    num_blocks=8,
    mlp_hidden=128,
    mlp_layers=1,
    num_classes=10,
) -> int:
    """Hand count, to check the Keras model against."""
    d, (h, w, c) = token_dim, image_shape
    n = (h // patch_size) * (w // patch_size)

    def mlp(d_in, hidden, layers, out):
        widths = [d_in] + [hidden] * layers + [out]
        return sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))

    tokeniser = patch_size * patch_size * c * d + d
    block = num_heads * 3 * d * d + mlp(d, mlp_hidden, mlp_layers, d) + 2 * 2 * d
    return tokeniser + n * d + d + num_blocks * block + mlp(d, mlp_hidden, mlp_layers, num_classes)


def make_train_step(model, optimizer, loss_fn, jit_compile: bool = False):
    """A compiled step: forward, loss, gradients (GradientTape), apply_gradients."""

    @tf.function(jit_compile=jit_compile)
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def make_optimizer_and_loss():
    optimizer = keras.optimizers.Adam(learning_rate=1e-3, weight_decay=1e-4)
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
    return optimizer, loss_fn


def random_batch(batch_size: int, seed: int = 0, num_classes: int = 10, image_shape=(28, 28, 1)):
    """Images uniform in [-1, 1], shape (B, 28, 28, 1), and random one-hot labels."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(-1.0, 1.0, size=(batch_size, *image_shape)).astype(np.float32)
    labels = np.eye(num_classes, dtype=np.float32)[rng.integers(0, num_classes, batch_size)]
    return tf.constant(images), tf.constant(labels)


def measure_throughput(
    batch_size: int,
    steps: int,
    warmup: int = 3,
    jit_compile: bool = False,
    repeats: int = 3,
    seed: int = 0,
) -> float:
    """Training images per second (median over `repeats` timings of `steps` steps).

    The first `warmup` steps (tracing and, with XLA, compilation) are not timed.
    """
    model = build_reference_model(seed)
    optimizer, loss_fn = make_optimizer_and_loss()
    step = make_train_step(model, optimizer, loss_fn, jit_compile=jit_compile)
    images, labels = random_batch(batch_size, seed)
    for _ in range(max(warmup, 1)):
        step(images, labels).numpy()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            loss = step(images, labels)
        loss.numpy()  # wait for the last step
        rates.append(batch_size * steps / (time.perf_counter() - start))
    return float(statistics.median(rates))


def sanity_check(batch_size: int = 16, steps: int = 10, seed: int = 0) -> dict:
    """Check the parameter count, that the position embedding and class token are trained,
    and that a few steps on one fixed random batch reduce the loss."""
    model = build_reference_model(seed)
    n_params, expected = count_params(model), expected_param_count(**REFERENCE)
    assert n_params == expected, (n_params, expected)
    optimizer, loss_fn = make_optimizer_and_loss()
    step = make_train_step(model, optimizer, loss_fn)
    images, labels = random_batch(batch_size, seed)
    pos0 = model.position.embedding.numpy().copy()
    cls0 = model.class_token.numpy().copy()
    losses = [float(step(images, labels))]
    pos_changed = not np.array_equal(pos0, model.position.embedding.numpy())
    cls_changed = not np.array_equal(cls0, model.class_token.numpy())
    for _ in range(steps - 1):
        losses.append(float(step(images, labels)))
    assert pos_changed and cls_changed, (pos_changed, cls_changed)
    assert losses[-1] < losses[0], losses
    return dict(
        params=n_params,
        position_trained=pos_changed,
        class_token_trained=cls_changed,
        first_loss=losses[0],
        last_loss=losses[-1],
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=[30, 10],
        help="timed steps per repeat, one per batch size (last one reused)",
    )
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-xla", action="store_true", help="skip the jit_compile=True runs")
    parser.add_argument("--check", action="store_true", help="run sanity_check() first")
    args = parser.parse_args(argv)

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}")
    model = build_reference_model()
    print(f"parameters: {count_params(model):,} (expected {expected_param_count(**REFERENCE):,})")
    if args.check:
        print("sanity:", sanity_check())
    for i, batch_size in enumerate(args.batch_sizes):
        steps = args.steps[min(i, len(args.steps) - 1)]
        for jit in [False] if args.no_xla else [False, True]:
            rate = measure_throughput(
                batch_size, steps, args.warmup, jit_compile=jit, repeats=args.repeats
            )
            print(f"batch {batch_size:4d}  XLA={'on ' if jit else 'off'}  {rate:8.1f} images/s")


if __name__ == "__main__":
    main()
