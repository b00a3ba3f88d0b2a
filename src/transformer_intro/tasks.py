"""What differs between the book's training runs, as *tasks*; ``training.fit`` trains any of them.

A task holds its data on the device and provides three things:

* ``batch(key, batch_size)``: a batch drawn on the device with ``key`` (``fit`` passes
  ``fold_in(PRNGKey(seed), t)`` at step t, so a batch depends only on the seed and the step);
* ``loss(model, batch)``: the scalar mean loss the model is trained on, and a dict of metrics;
* ``evaluate(model)``: figures on held-out data, as plain floats.

Four tasks cover the book: :class:`ImageClassification` (the ViT on MNIST, chapter 8),
:class:`NextSymbolPrediction` (the character language model, chapter 9),
:class:`SequenceToSequence` (the date-normalising encoder-decoder, chapter 10) and
:class:`SupervisedPairs` (prompts and answers for a causal language model, with the loss on the
answers only: fine-tuning, chapter 16). Each chapter's
recipe is here too, so that chapters and benchmarks import it rather than retype it.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from .training.recipe import Recipe
from .xla_flags import optimised_jit

__all__ = [
    "DATES_RECIPE",
    "ImageClassification",
    "NextSymbolPrediction",
    "SHAKESPEARE_RECIPE",
    "SequenceToSequence",
    "SupervisedPairs",
    "VALIDATION_WINDOWS",
    "VIT_RECIPE",
    "bits",
    "evaluation_windows",
    "inputs_and_targets",
    "pack_pairs",
    "prepare_images",
    "random_shifts",
    "random_windows",
    "shift_images",
]

# Chapter 8: the `default` ViT on MNIST, 10 passes' worth of steps at batch 64 (60,000 // 64 = 937
# steps a pass), AdamW decaying every parameter, as the reference trains.
VIT_RECIPE = Recipe(
    steps=9370,
    batch_size=64,
    learning_rate=2e-3,
    warmup_steps=300,
    weight_decay=0.05,
    decay="all",
    b2=0.999,
    steps_per_call=25,
)
# Chapter 9: the character language model; AdamW decaying the matrices only, b2 = 0.99, clipping.
SHAKESPEARE_RECIPE = Recipe(
    steps=1000,
    batch_size=64,
    learning_rate=2e-3,
    warmup_steps=100,
    final_learning_rate=1e-4,
    weight_decay=0.1,
    decay="matrices",
    b2=0.99,
    clip_norm=1.0,
    steps_per_call=25,
)
# Chapter 10: the date-normalising encoder-decoder.
DATES_RECIPE = Recipe(
    steps=850,
    batch_size=128,
    learning_rate=4e-3,
    warmup_steps=100,
    weight_decay=0.01,
    decay="all",
    b2=0.999,
    steps_per_call=25,
)
VALIDATION_WINDOWS = 512  # fixed windows spread evenly over the held-out plays (chapter 9)


def _rows_drawn(key: PRNGKeyArray, batch_size: int, **arrays: Array) -> dict[str, Array]:
    """The same B rows, drawn with replacement, of each of ``arrays`` (of equal length)."""
    first = next(iter(arrays.values()))
    indices = jax.random.randint(key, (batch_size,), 0, first.shape[0])
    return {name: array[indices] for name, array in arrays.items()}


def _cross_entropy(logits: Array, labels: Array) -> Array:
    """-log softmax(logits)[label] at every position: the loss of a categorical prediction."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


# ---------------------------------------------------------------------------------------------
# Image classification
# ---------------------------------------------------------------------------------------------


def prepare_images(images: Array) -> Float[Array, "B 1 H W"]:
    """uint8 (B, H, W) in [0, 255] to float32 (B, 1, H, W) in [-1, 1].

    Scaled as the reference scales them.
    """
    return (images.astype(jnp.float32) * (2.0 / 255.0) - 1.0)[:, None]


def shift_images(images: ArrayLike, offsets: Int[Array, "B 2"], max_shift: int) -> Array:
    """Translate each image of a (B, H, W) batch within its zero-padded frame.

    Image i's (H, W) window starts at row ``offsets[i, 0]`` and column ``offsets[i, 1]`` of the
    image padded with ``max_shift`` zeros on every side.

    Offsets run from 0 to ``2 * max_shift``; ``(max_shift, max_shift)`` leaves the image where it
    is.

    Raises:
        ValueError: if the images are not a (B, H, W) batch, or ``max_shift`` is negative or not
            smaller than half the image.
    """
    if images.ndim != 3:
        raise ValueError(f"expected images of shape (B, H, W), got {images.shape}")
    height, width = images.shape[1:]
    if max_shift < 0 or 2 * max_shift >= min(height, width):
        raise ValueError(
            f"max_shift must be in [0, {(min(height, width) - 1) // 2}] for {height}x{width} "
            f"images, got {max_shift}"
        )

    def crop(image, offset):
        padded = jnp.pad(image, max_shift)
        return jax.lax.dynamic_slice(padded, (offset[0], offset[1]), (height, width))

    return jax.vmap(crop)(images, offsets)


def random_shifts(key: PRNGKeyArray, images: ArrayLike, max_shift: int) -> ArrayLike:
    """Move each image of a (B, H, W) batch by its own random whole-pixel offset.

    ``max_shift=0`` returns ``images`` itself, a NumPy array if it was one.

    The offset along each axis is drawn uniformly from ``[-max_shift, max_shift]``, and the
    uncovered border is filled with zeros.

    A patch-based model has no built-in translation invariance: a digit moved by two pixels falls
    on the patch grid differently and meets different position embeddings. Showing it shifted
    copies teaches what a convolution would have known.
    """
    if max_shift == 0:
        return images
    offsets = jax.random.randint(key, (images.shape[0], 2), 0, 2 * max_shift + 1)
    return shift_images(images, offsets, max_shift)


class ImageClassification(eqx.Module):
    """Classify images: softmax cross-entropy of the model's logits against the labels.

    Training batches are drawn uniformly from the training split (each example independently),
    each image moved by a random shift of up to ``max_shift`` pixels (data augmentation).
    ``evaluate`` gives the loss and accuracy on the whole test split.
    """

    images: Array
    labels: Array
    test_images: Array | None
    test_labels: Array | None
    max_shift: int = eqx.field(static=True)
    eval_batch_size: int = eqx.field(static=True)

    def __init__(self, train, test=None, *, max_shift: int = 0, eval_batch_size: int = 1000):
        """Copy the images and labels to the device.

        Args:
            train: ``(images, labels)``, uint8 (S, H, W) and integer (S,); copied to the device.
            test: the same for the split ``evaluate`` measures, or None.
            max_shift: random translation of each training image, in pixels.
            eval_batch_size: images per compiled evaluation call.

        Raises:
            ValueError: if a split is empty, or its images and labels differ in number, or
                ``eval_batch_size`` is not positive.
        """
        images, labels = _image_split("training", train)
        self.images, self.labels = jnp.asarray(images), jnp.asarray(labels, jnp.int32)
        if test is None:
            self.test_images = self.test_labels = None
        else:
            test_images, test_labels = _image_split("test", test)
            self.test_images = jnp.asarray(test_images)
            self.test_labels = jnp.asarray(test_labels, jnp.int32)
        if eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be at least 1, got {eval_batch_size}")
        self.max_shift = max_shift
        self.eval_batch_size = eval_batch_size

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict[str, Array]:
        """B training examples drawn with replacement, shifted, scaled to [-1, 1].

        Returns:
            ``{"images": (B, 1, H, W) float32, "labels": (B,) int32}``.
        """
        index_key, shift_key = jax.random.split(key)
        indices = jax.random.randint(index_key, (batch_size,), 0, self.labels.shape[0])
        images = random_shifts(shift_key, self.images[indices], self.max_shift)
        return {"images": prepare_images(images), "labels": self.labels[indices]}

    def loss(self, model, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        """The mean cross-entropy over the batch, and ``{"accuracy": ...}`` on it."""
        logits = model.batched(batch["images"])
        loss = _cross_entropy(logits, batch["labels"]).mean()
        return loss, {"accuracy": (logits.argmax(-1) == batch["labels"]).mean()}

    def evaluate(self, model) -> dict[str, float]:
        """Mean loss and accuracy over every example of the test split.

        Raises:
            ValueError: if the task has no test split.
        """
        if self.test_images is None:
            raise ValueError("this task has no test split to evaluate on")
        total_loss, correct, n = 0.0, 0, self.test_labels.shape[0]
        for start in range(0, n, self.eval_batch_size):
            chunk = slice(start, start + self.eval_batch_size)
            loss, hits = _classification_sums(
                model, self.test_images[chunk], self.test_labels[chunk]
            )
            total_loss, correct = total_loss + float(loss), correct + int(hits)
        return {"loss": total_loss / n, "accuracy": correct / n}

    def predict(self, model, images: np.ndarray) -> np.ndarray:
        """The C logits of every image of a uint8 (B, H, W) array, ``eval_batch_size`` at a time."""
        return np.concatenate(
            [
                np.asarray(_logits(model, jnp.asarray(images[i : i + self.eval_batch_size])))
                for i in range(0, len(images), self.eval_batch_size)
            ]
        )


def _image_split(name: str, split) -> tuple:
    """``(images, labels)`` of one split, checked to pair every image with one label."""
    images, labels = split
    if len(images) != len(labels) or len(images) == 0:
        raise ValueError(
            f"the {name} split has {len(images)} images and {len(labels)} labels: give one "
            "label per image, and at least one image"
        )
    return images, labels


@optimised_jit
def _logits(model, images):
    return model.batched(prepare_images(images))


@optimised_jit
def _classification_sums(model, images, labels):
    logits = _logits(model, images)
    return _cross_entropy(logits, labels).sum(), (logits.argmax(-1) == labels).sum()


# ---------------------------------------------------------------------------------------------
# Next-symbol prediction
# ---------------------------------------------------------------------------------------------


def inputs_and_targets(
    windows: Int[ArrayLike, "B W"],
) -> tuple[Int[ArrayLike, "B W-1"], Int[ArrayLike, "B W-1"]]:
    """A window of W = N + 1 symbols gives N inputs and, at each, the symbol that follows.

    The two are slices of ``windows``: NumPy arrays for a NumPy array, JAX arrays for a JAX one.
    """
    return windows[:, :-1], windows[:, 1:]


def random_windows(
    ids: Int[Array, " L"], key: PRNGKeyArray, batch_size: int, length: int
) -> Int[Array, "B length"]:
    """``batch_size`` windows of ``length`` consecutive symbols at uniformly random places.

    Args:
        ids: the text as symbol ids.
        key: a PRNG key that picks the places.
        batch_size: B.
        length: the number of symbols per window.
    """
    starts = jax.random.randint(key, (batch_size,), 0, ids.shape[0] - length + 1)
    return jax.vmap(lambda s: jax.lax.dynamic_slice_in_dim(ids, s, length))(starts)


def evaluation_windows(ids: np.ndarray, count: int, length: int) -> np.ndarray:
    """``count`` windows of ``length`` symbols evenly spread over a text: a fixed evaluation set.

    Raises:
        ValueError: if the text is shorter than one window.
    """
    if ids.shape[0] < length:
        raise ValueError(f"a text of {ids.shape[0]} symbols is shorter than one window of {length}")
    starts = np.linspace(0, ids.shape[0] - length, count).astype(np.int64)
    return np.stack([ids[s : s + length] for s in starts])


def bits(nats: float) -> float:
    """A loss in nats per symbol as bits per symbol."""
    return nats / math.log(2)


class NextSymbolPrediction(eqx.Module):
    """Predict every next symbol of a text: mean cross-entropy in nats per symbol.

    A batch is ``batch_size`` windows of ``window + 1`` consecutive symbols at random places of
    the training text; position n of a window predicts symbol n + 1. ``evaluate`` gives the mean
    loss on fixed windows spread evenly over the validation text.
    """

    train_ids: Array
    validation_windows: Array | None
    window: int = eqx.field(static=True)
    eval_chunk: int = eqx.field(static=True)

    def __init__(
        self,
        train_ids,
        *,
        window: int,
        validation_ids=None,
        num_validation_windows: int = VALIDATION_WINDOWS,
        eval_chunk: int = 128,
    ):
        """Copy the training text, and evaluation windows cut from the held-out text, to the device.

        Args:
            train_ids: the training text as symbol ids, (L,).
            window: N, the number of input symbols of a training window (the model's window).
            validation_ids: the held-out text as symbol ids, or None.
            num_validation_windows: how many evaluation windows to spread over it.
            eval_chunk: windows per evaluation pass; a last, smaller pass takes the windows
                beyond whole chunks.

        Raises:
            ValueError: if the training text is too short for one window of N + 1 symbols, or
                there are validation ids but fewer than one window to cut from them, or
                ``eval_chunk`` is below 1.
        """
        train_ids = np.asarray(train_ids, np.int32)
        if validation_ids is not None and num_validation_windows < 1:
            raise ValueError(
                f"num_validation_windows must be at least 1, got {num_validation_windows}: "
                "the validation loss is a mean over windows (or give no validation_ids)"
            )
        if eval_chunk < 1:
            raise ValueError(f"eval_chunk must be at least 1, got {eval_chunk}")
        if train_ids.shape[0] <= window:
            raise ValueError(
                f"a text of {train_ids.shape[0]} symbols has no window of {window + 1}"
            )
        self.train_ids = jnp.asarray(train_ids)
        self.validation_windows = (
            None
            if validation_ids is None
            else jnp.asarray(
                evaluation_windows(
                    np.asarray(validation_ids, np.int32), num_validation_windows, window + 1
                )
            )
        )
        self.window = window
        self.eval_chunk = eval_chunk

    def batch(self, key: PRNGKeyArray, batch_size: int) -> Int[Array, "B {self.window}+1"]:
        """B windows of N + 1 consecutive symbols from the training text (see the class)."""
        return random_windows(self.train_ids, key, batch_size, self.window + 1)

    def loss(
        self, model, windows: Int[Array, "B {self.window}+1"]
    ) -> tuple[Array, dict[str, Array]]:
        """The mean cross-entropy, in nats, of every next-symbol prediction; no metrics."""
        inputs, targets = inputs_and_targets(windows)
        return _cross_entropy(model.batched(inputs), targets).mean(), {}

    def evaluate(self, model) -> dict[str, float]:
        """``{"nats_per_symbol": ...}``, the mean loss on the validation windows.

        Raises:
            ValueError: if the task has no validation text.
        """
        if self.validation_windows is None:
            raise ValueError("this task has no validation text to evaluate on")
        return {"nats_per_symbol": float(_windows_loss(self, model))}

    def symbols_per_character(self, characters) -> float:
        """The validation windows' predicted symbols per character of the text they spell.

        :meth:`evaluate`'s nats per symbol times this is nats per character, a loss that
        compares models reading different tokens (chapter 13).

        Args:
            characters: (V,), how many characters each symbol id spells: 1 for every symbol of a
                character :class:`~transformer_intro.tokenisers.Vocabulary`, the length of its
                text for a byte-pair token.

        Raises:
            ValueError: if the task has no validation text, or ``characters`` is not one count
                per symbol id of the windows, each at least 1.
        """
        if self.validation_windows is None:
            raise ValueError("this task has no validation text to count characters in")
        targets = np.asarray(self.validation_windows)[:, 1:]  # the predicted symbols
        characters = np.asarray(characters)
        if characters.ndim != 1 or characters.shape[0] <= targets.max():
            raise ValueError(
                f"characters must hold one count per symbol id (at least {targets.max() + 1}), "
                f"got shape {characters.shape}"
            )
        if (characters < 1).any():
            raise ValueError("every symbol spells at least one character: got a count below 1")
        return float(targets.size / characters[targets].sum())


@optimised_jit
def _windows_loss(task: NextSymbolPrediction, model) -> Array:
    """The mean loss over every validation window: whole chunks, then the remainder, weighed."""
    windows = task.validation_windows
    total, chunk = windows.shape[0], task.eval_chunk
    count = total // chunk * chunk
    remainder = windows[count:]
    if count == 0:
        return task.loss(model, remainder)[0]
    chunks = windows[:count].reshape(-1, chunk, windows.shape[1])
    whole = jax.lax.map(lambda w: task.loss(model, w)[0], chunks).mean()
    if count == total:  # the same sum as before the remainder was counted, to the last bit
        return whole
    return (whole * count + task.loss(model, remainder)[0] * (total - count)) / total


# ---------------------------------------------------------------------------------------------
# Sequence to sequence
# ---------------------------------------------------------------------------------------------


class SequenceToSequence(eqx.Module):
    """Map source sequences to target sequences with teacher forcing.

    The loss is the mean cross-entropy over the real (non-padding) target tokens, with the
    per-token accuracy as a metric; padded positions weigh nothing. ``evaluate`` decodes the test
    sources greedily and reports the exact match (every real target token right), with the
    teacher-forced loss and per-token accuracy.
    """

    sources: Array
    target_inputs: Array
    targets: Array
    test: tuple[Array, Array, Array] | None
    start_id: int = eqx.field(static=True)
    pad_id: int = eqx.field(static=True)

    def __init__(self, train, test=None, *, start_id: int, pad_id: int = 0):
        """Copy the pairs to the device, as int32.

        Args:
            train: ``(sources, target_inputs, targets)``, integer arrays (S, N_s), (S, N_t) and
                (S, N_t) for S pairs: the decoder's inputs are the targets shifted right behind
                ``start_id``.
            test: the same for the pairs ``evaluate`` measures, or None.
            start_id: the id that starts every decoder input (greedy decoding starts with it).
            pad_id: the padding id of the sources, the model's ``pad_id``: the loss itself reads
                the model's.

        Raises:
            ValueError: if a split is empty, its three arrays differ in rows, its decoder
                inputs and targets differ in shape, or a source is all padding (no token for
                the decoder to read: its attention would be a softmax over nothing, NaN).
        """
        self.sources, self.target_inputs, self.targets = _sequence_split("training", train, pad_id)
        self.test = None if test is None else _sequence_split("test", test, pad_id)
        self.start_id = start_id
        self.pad_id = pad_id

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict[str, Array]:
        """B training pairs drawn with replacement.

        Returns:
            ``{"sources": (B, N_s), "target_inputs": (B, N_t), "targets": (B, N_t)}``.
        """
        return _rows_drawn(
            key,
            batch_size,
            sources=self.sources,
            target_inputs=self.target_inputs,
            targets=self.targets,
        )

    def loss(self, model, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        """The mean cross-entropy over real target tokens, and ``{"accuracy": ...}`` per token."""
        logits = model.batched(batch["sources"], batch["target_inputs"])
        targets = batch["targets"]
        is_real = targets != model.pad_id
        count = jnp.maximum(is_real.sum(), 1)
        loss = jnp.where(is_real, _cross_entropy(logits, targets), 0.0).sum() / count
        accuracy = jnp.where(is_real, logits.argmax(-1) == targets, False).sum() / count
        return loss, {"accuracy": accuracy}

    def evaluate(self, model) -> dict[str, float]:
        """Exact match of greedy decoding, teacher-forced loss and per-token accuracy.

        All measured on the test pairs.

        Raises:
            ValueError: if the task has no test pairs.
        """
        if self.test is None:
            raise ValueError("this task has no test pairs to evaluate on")
        exact, loss, accuracy = _sequence_figures(self, model)
        return {"exact_match": float(exact), "loss": float(loss), "accuracy": float(accuracy)}


def _sequence_split(name: str, split, pad_id: int) -> tuple[Array, Array, Array]:
    """``(sources, target_inputs, targets)`` of one split as int32, checked to hold whole pairs.

    A source of padding alone is refused here, where the data are at hand: in the model every
    token reading it would attend to no input, a NaN that ``fit`` would blame on the learning
    rate. (The attention layer keeps the softmax over nothing as NaN, chapter 2's example.)
    """
    sources, target_inputs, targets = (jnp.asarray(a, jnp.int32) for a in split)
    rows = [a.shape[0] if a.ndim else 0 for a in (sources, target_inputs, targets)]
    if len(set(rows)) > 1 or rows[0] == 0:
        raise ValueError(
            f"the {name} split has {rows[0]} sources, {rows[1]} decoder inputs and {rows[2]} "
            "targets: give one row of each per pair, and at least one pair"
        )
    if target_inputs.shape != targets.shape:
        raise ValueError(
            f"the {name} split's decoder inputs are {target_inputs.shape} but its targets "
            f"{targets.shape}: the inputs are the targets shifted right, so the shapes must match"
        )
    empty = np.flatnonzero(
        np.all(np.asarray(sources) == pad_id, axis=tuple(range(1, sources.ndim)))
    )
    if empty.size:
        raise ValueError(
            f"the {name} split's source {empty[0]} is all padding (pad_id {pad_id})"
            + (f", and {empty.size - 1} more" if empty.size > 1 else "")
            + ": the decoder would read no token of it; drop such pairs or give each source "
            "at least one real token"
        )
    return sources, target_inputs, targets


@optimised_jit
def _sequence_figures(task: SequenceToSequence, model):
    sources, target_inputs, targets = task.test
    generated = model.greedy_decode(sources, task.start_id, targets.shape[1])
    is_real = targets != model.pad_id
    exact = jnp.all((generated == targets) | ~is_real, axis=1).mean()
    batch = {"sources": sources, "target_inputs": target_inputs, "targets": targets}
    loss, metrics = task.loss(model, batch)
    return exact, loss, metrics["accuracy"]


# ---------------------------------------------------------------------------------------------
# Supervised pairs for a causal language model
# ---------------------------------------------------------------------------------------------


class SupervisedPairs(eqx.Module):
    """Prompts and answers for a causal language model; the loss counts the answer tokens only.

    Example s is packed as one sequence, its prompt P_s followed by its answer, padded to N + 1
    tokens (N the model's window). As in :class:`NextSymbolPrediction`, position n of the
    inputs predicts token n + 1; but only the predictions of answer tokens count, so the model
    is trained to answer, not to write prompts. With |P_s| prompt tokens and |Y_s| answer
    tokens, the positions that count are n = |P_s| - 1, ..., |P_s| + |Y_s| - 2, and the loss is
    the mean cross-entropy over those positions of every example in the batch (each answer token
    weighs the same). Padding is never counted.

    ``evaluate`` gives, on the test pairs, the same loss, the per-token accuracy of the answers
    and the exact match (every answer token the most likely one given the tokens before it,
    which is what greedy decoding from the prompt would write).
    """

    inputs: Int[Array, "S N"]
    targets: Int[Array, "S N"]
    answer_mask: Array
    test: tuple[Array, Array, Array] | None
    window: int = eqx.field(static=True)
    vocab_size: int = eqx.field(static=True)

    def __init__(self, pairs, test_pairs=None, *, window: int, vocab_size: int, pad_id: int = 0):
        """Pack the pairs into padded sequences and answer masks, on the device.

        Args:
            pairs: ``(prompt, answer)`` pairs of token-id sequences, the training set.
            test_pairs: the same for the pairs ``evaluate`` measures, or None.
            window: N, the model's window: prompt plus answer may be at most N + 1 tokens
                (the model reads all but the last).
            vocab_size: |V|; every id must lie in [0, |V|).
            pad_id: the id written after the answer (its predictions are never counted).

        Raises:
            ValueError: if there are no pairs, a prompt or answer is empty, a pair is longer
                than N + 1 tokens, or an id lies outside the vocabulary (the message names the
                pair).
        """
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id {pad_id} is outside the vocabulary [0, {vocab_size})")
        self.window, self.vocab_size = window, vocab_size
        self.inputs, self.targets, self.answer_mask = pack_pairs(
            "training", pairs, window, vocab_size, pad_id
        )
        self.test = (
            None
            if test_pairs is None
            else pack_pairs("test", test_pairs, window, vocab_size, pad_id)
        )

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict[str, Array]:
        """B training pairs drawn with replacement.

        Returns:
            ``{"inputs": (B, N), "targets": (B, N), "answer_mask": (B, N) bool}``; the mask is
            True where the target is an answer token.
        """
        return _rows_drawn(
            key, batch_size, inputs=self.inputs, targets=self.targets, answer_mask=self.answer_mask
        )

    def loss(self, model, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        """The mean cross-entropy over the answer tokens, and ``{"accuracy": ...}`` on them.

        Raises:
            ValueError: if the model's window or vocabulary differs from the task's.
        """
        config = model.config
        if config.window < self.window or config.vocab_size != self.vocab_size:
            raise ValueError(
                f"the pairs were packed for a window of {self.window} and {self.vocab_size} "
                f"symbols, but the model has a window of {config.window} and "
                f"{config.vocab_size} symbols"
            )
        logits = model.batched(batch["inputs"])
        targets, counted = batch["targets"], batch["answer_mask"]
        count = jnp.maximum(counted.sum(), 1)
        loss = jnp.where(counted, _cross_entropy(logits, targets), 0.0).sum() / count
        accuracy = jnp.where(counted, logits.argmax(-1) == targets, False).sum() / count
        return loss, {"accuracy": accuracy}

    def evaluate(self, model) -> dict[str, float]:
        """Answer-only loss, per-token accuracy and exact match on the test pairs.

        Raises:
            ValueError: if the task has no test pairs.
        """
        if self.test is None:
            raise ValueError("this task has no test pairs to evaluate on")
        loss, accuracy, exact = _pairs_figures(self, model)
        return {"loss": float(loss), "accuracy": float(accuracy), "exact_match": float(exact)}


def pack_pairs(name: str, pairs, window: int, vocab_size: int, pad_id: int = 0):
    """``(inputs, targets, answer_mask)``, each (S, N), of one split's pairs, checked.

    How :class:`SupervisedPairs` packs its pairs; ``name`` names the split in the errors.
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError(f"the {name} split has no pairs: give at least one (prompt, answer)")
    sequences = np.full((len(pairs), window + 1), pad_id, np.int32)
    counted = np.zeros((len(pairs), window), bool)
    for s, (prompt, answer) in enumerate(pairs):
        prompt, answer = np.asarray(prompt).ravel(), np.asarray(answer).ravel()
        # An empty prompt leaves the first answer token with nothing to be predicted from.
        if prompt.size == 0 or answer.size == 0:
            part = "prompt" if prompt.size == 0 else "answer"
            raise ValueError(f"pair {s} of the {name} split has an empty {part}")
        length = prompt.size + answer.size
        if length > window + 1:
            raise ValueError(
                f"pair {s} of the {name} split has {prompt.size} prompt and {answer.size} "
                f"answer tokens, {length} in all: longer than the model's window of {window} "
                f"plus the last token, {window + 1}"
            )
        ids = np.concatenate([prompt, answer])
        if ids.dtype.kind not in "iu":
            raise ValueError(f"pair {s} of the {name} split holds {ids.dtype} values, not ids")
        if ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError(
                f"pair {s} of the {name} split has ids outside the vocabulary [0, {vocab_size}) "
                f"(from {ids.min()} to {ids.max()})"
            )
        sequences[s, :length] = ids
        # Position n predicts token n + 1: the answer's tokens are targets at n = |P| - 1 on.
        counted[s, prompt.size - 1 : length - 1] = True
    inputs, targets = inputs_and_targets(jnp.asarray(sequences))
    return inputs, targets, jnp.asarray(counted)


@optimised_jit
def _pairs_figures(task: SupervisedPairs, model):
    inputs, targets, counted = task.test
    batch = {"inputs": inputs, "targets": targets, "answer_mask": counted}
    loss, metrics = task.loss(model, batch)
    right = model.batched(inputs).argmax(-1) == targets
    exact = jnp.all(right | ~counted, axis=1).mean()
    return loss, metrics["accuracy"], exact
