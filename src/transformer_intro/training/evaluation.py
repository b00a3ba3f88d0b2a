"""Evaluating trained models: bits per character of a text, and intervals for a proportion.

**Bits per character.** A language model's loss on a text, in nats per token, depends on its
tokens: a byte-pair token spells several characters, a character token one. Summed over the
text and divided by the characters the predicted tokens spell, it compares any two models of
the same text (chapter 13):

    bits per character = (sum over predicted tokens of -ln p(token | tokens before it))
                         / (ln 2 * characters those tokens spell)

A model reads at most its window of N tokens at a time, so a long text is cut into windows
(:func:`scoring_windows`). With ``stride = N`` (the default) the windows do not overlap: the
token at place n of a window is predicted from the n tokens before it in that window, as in
training. With a smaller stride each window starts ``stride`` tokens after the previous one and
scores only the tokens no earlier window scored, so each prediction sees at least N - stride
tokens. Either way every token after the first is predicted exactly once (the first has no
context and is not scored), and the characters counted are those of the predicted tokens.

**Intervals.** An exact-match rate of k right answers out of n is an estimate of a proportion;
:func:`wilson_interval` and :func:`clopper_pearson_interval` give a 95% interval for it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..datasets.shakespeare import VALIDATION_PLAYS, load_play
from ..quantisation import holds_blocks
from ..xla_flags import optimised_jit

__all__ = [
    "HELD_OUT_CHARACTERS_PER_PLAY",
    "TextLoss",
    "Windows",
    "character_counts",
    "clopper_pearson_interval",
    "held_out_passages",
    "language_model_logits",
    "scoring_windows",
    "text_loss",
    "token_loss",
    "wilson_interval",
]


# ---------------------------------------------------------------------------------------------
# Windows over a long text
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Windows:
    """Windows of a token sequence, each N tokens long (the last padded), with what each scores.

    Attributes:
        inputs: (W, N) token ids a model reads, padded with ``pad_id`` after the text's end.
        targets: (W, N) the token each place predicts (``inputs`` shifted by one).
        positions: (W, N) the index in the sequence of each target (-1 for padding).
        scored: (W, N) whether each target counts: each sequence index 1 .. L-1 exactly once.
    """

    inputs: np.ndarray
    targets: np.ndarray
    positions: np.ndarray
    scored: np.ndarray


def scoring_windows(
    ids: Int[np.ndarray, " L"], context: int, stride: int | None = None, *, pad_id: int = 0
) -> Windows:
    """Cut a token sequence into windows of ``context`` tokens that score each token once.

    Window w reads ``ids[s : s + N]`` with ``s = w * stride`` and predicts ``ids[s + 1 : s + N +
    1]``; it scores the targets at sequence indices above ``s + N - stride`` (all of them in the
    first window), so with ``stride = N`` the windows are disjoint and with a smaller stride
    each scored token has at least ``N - stride`` tokens of context. The windows stop once index
    L - 1 is scored; the last one is padded to N after the text's end, which a causal model's
    earlier predictions never read.

    Args:
        ids: (L,) the text as token ids, L >= 2.
        context: N, the tokens a model reads at once (at most its window).
        stride: tokens between the starts of consecutive windows, 1 <= stride <= N; N by default.
        pad_id: the id that fills the last window (any id of the vocabulary).

    Raises:
        ValueError: if the text has fewer than two tokens, or context or stride is out of range.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.shape[0] < 2:
        raise ValueError(
            f"need a sequence of at least two token ids (one to read, one to predict), got "
            f"shape {ids.shape}"
        )
    if context < 1:
        raise ValueError(f"context must be at least 1 token, got {context}")
    stride = context if stride is None else stride
    if not 1 <= stride <= context:
        raise ValueError(f"stride must be between 1 and the context ({context}), got {stride}")
    length = ids.shape[0]
    count = 1 + max(0, math.ceil((length - 1 - context) / stride))
    starts = np.arange(count) * stride
    positions = starts[:, None] + 1 + np.arange(context)[None, :]  # index of each target
    inside = positions < length
    first_new = np.where(starts == 0, 1, starts + context - stride + 1)  # first unscored index
    scored = inside & (positions >= first_new[:, None])
    padded = np.concatenate([ids, np.full(context + 1, pad_id, ids.dtype)])
    targets = padded[positions]
    inputs = padded[positions - 1]
    return Windows(
        inputs=inputs.astype(np.int32),
        targets=targets.astype(np.int32),
        positions=np.where(inside, positions, -1),
        scored=scored,
    )


# ---------------------------------------------------------------------------------------------
# The loss of a text
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TextLoss:
    """A model's summed loss over a text, and what it was summed over.

    Two results add (``a + b``) into the loss over both texts.

    Attributes:
        nats: the sum of -ln p(token | context) over the scored tokens.
        tokens: how many tokens were scored.
        characters: how many characters those tokens spell.
        windows: how many windows the model read.
    """

    nats: float
    tokens: int
    characters: int
    windows: int

    def __add__(self, other: TextLoss) -> TextLoss:
        return TextLoss(
            self.nats + other.nats,
            self.tokens + other.tokens,
            self.characters + other.characters,
            self.windows + other.windows,
        )

    @property
    def bits_per_character(self) -> float:
        """The summed loss in bits (nats / ln 2) per character spelled."""
        return self.nats / math.log(2) / self.characters

    @property
    def bits_per_token(self) -> float:
        """The summed loss in bits per scored token."""
        return self.nats / math.log(2) / self.tokens

    @property
    def nats_per_token(self) -> float:
        """The mean loss in nats per scored token."""
        return self.nats / self.tokens


def character_counts(tokeniser) -> np.ndarray:
    """(|V|,) how many characters each token id spells.

    For a byte-level BPE (anything with ``decode_bytes``) a token's bytes are counted that
    start a UTF-8 character, so a character split over two tokens counts once, in the token
    holding its first byte; for a character :class:`~transformer_intro.tokenisers.Vocabulary`
    each symbol's length (1 for a character); otherwise the length of ``decode([i])``.
    """
    size = len(tokeniser)
    if hasattr(tokeniser, "decode_bytes"):
        return np.array(
            [sum(1 for b in tokeniser.decode_bytes([i]) if b & 0xC0 != 0x80) for i in range(size)]
        )
    if hasattr(tokeniser, "symbols"):
        return np.array([len(s) for s in tokeniser.symbols])
    return np.array([len(tokeniser.decode([i])) for i in range(size)])


def language_model_logits(model, inputs: Int[Array, "B N"]) -> Float[Array, "B N V"]:
    """Next-token logits of a batch of windows from a :class:`LanguageModel`.

    A float model runs ``model.batched``; a model whose matrices are kept in blocks
    (``quantise_model(model)``, or ``load_smollm2(quantised=True)``) runs each window through
    ``model.extend`` with an empty key-value cache, the path its products support.
    """
    if holds_blocks(model):
        window = inputs.shape[1]
        rows = [model.extend(row, model.empty_cache(window), 0)[0] for row in inputs]
        return jnp.stack(rows)
    return model.batched(inputs)


@optimised_jit  # an evaluation over a long text: worth XLA's full optimisation
def _scored_nats(model, inputs, targets, scored, logits_of):
    log_p = jax.nn.log_softmax(logits_of(model, inputs).astype(jnp.float32), axis=-1)
    nats = -jnp.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    return jnp.where(scored, nats, 0.0).sum()


def token_loss(
    model,
    ids: Int[np.ndarray, " L"],
    characters,
    *,
    context: int,
    stride: int | None = None,
    batch_size: int = 1,
    logits: Callable = language_model_logits,
    progress: bool = False,
    description: str | None = None,
) -> TextLoss:
    """The loss a model gives a token sequence, each token after the first scored once.

    Args:
        model: the model, passed to ``logits`` (as a traced argument of the compiled step).
        ids: (L,) the text's token ids.
        characters: (|V|,) whole numbers, the characters each id spells
            (:func:`character_counts`).
        context: N, tokens per window (at most the model's window).
        stride: see :func:`scoring_windows`; N (disjoint windows) by default.
        batch_size: windows per compiled call; the windows are padded to a whole number of
            batches with windows that score nothing.
        logits: ``logits(model, inputs (B, N)) -> (B, N, |V|)``;
            :func:`language_model_logits` by default.
        progress: show a tqdm bar over the batches.
        description: the bar's label.

    Raises:
        ValueError: for the reasons of :func:`scoring_windows`, or if ``characters`` has no
            count for some id of the text.
    """
    ids = np.asarray(ids)
    characters = np.asarray(characters)
    if characters.ndim != 1 or ids.max() >= characters.shape[0] or ids.min() < 0:
        raise ValueError(
            f"characters must hold one count per token id (ids run up to {ids.max()}), got "
            f"shape {characters.shape}"
        )
    windows = scoring_windows(ids, context, stride)
    count = windows.inputs.shape[0]
    extra = -count % batch_size  # windows that score nothing, for a whole number of batches

    def padded(a, fill):
        return np.concatenate([a, np.full((extra, context), fill, a.dtype)])

    inputs, targets = padded(windows.inputs, 0), padded(windows.targets, 0)
    scored = padded(windows.scored, False)
    batches = range(0, inputs.shape[0], batch_size)
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=description, unit="batch")
    nats = 0.0
    for b in batches:
        part = slice(b, b + batch_size)
        nats += float(
            _scored_nats(
                model,
                jnp.asarray(inputs[part]),
                jnp.asarray(targets[part]),
                jnp.asarray(scored[part]),
                logits,
            )
        )
    scored_ids = windows.targets[windows.scored]
    return TextLoss(
        nats=nats,
        tokens=int(scored_ids.size),
        characters=int(characters[scored_ids].sum()),
        windows=count,
    )


def text_loss(
    model,
    tokeniser,
    texts: str | Sequence[str],
    *,
    context: int,
    stride: int | None = None,
    batch_size: int = 1,
    logits: Callable = language_model_logits,
    progress: bool = False,
    description: str | None = None,
) -> TextLoss:
    """:func:`token_loss` of one text or the sum over several, encoded with ``tokeniser``.

    Each text is read on its own (no window crosses from one to the next). The characters of
    every text's tokens are checked to add up to the text's length, so none is lost or counted
    twice by the tokeniser.

    Args:
        model: the model (see :func:`token_loss`).
        tokeniser: has ``encode(text)`` and either ``decode_bytes`` or ``decode`` (chapter 9's
            ``Vocabulary``, chapter 13's ``BytePairEncoding``, SmolLM2's tokeniser).
        texts: a text or a list of texts.
        context: N, tokens per window (see :func:`token_loss`).
        stride: see :func:`scoring_windows`.
        batch_size: windows per compiled call.
        logits: ``logits(model, inputs)``, as for :func:`token_loss`.
        progress: show a tqdm bar over each text's batches.
        description: the bar's label (numbered per text when there are several).

    Raises:
        ValueError: if a text's tokens do not spell as many characters as it has.
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    characters = character_counts(tokeniser)
    total = TextLoss(0.0, 0, 0, 0)
    for i, text in enumerate(texts):
        ids = np.asarray(tokeniser.encode(text), np.int64)
        spelled = int(characters[ids].sum())
        if spelled != len(text):
            raise ValueError(
                f"text {i}: its {ids.size} tokens spell {spelled} characters, but it has "
                f"{len(text)}: the tokeniser does not give back the text it was given"
            )
        label = description if len(texts) == 1 or not description else f"{description} {i + 1}"
        total = total + token_loss(
            model,
            ids,
            characters,
            context=context,
            stride=stride,
            batch_size=batch_size,
            logits=logits,
            progress=progress,
            description=label,
        )
    return total


HELD_OUT_CHARACTERS_PER_PLAY = 25_000


def held_out_passages(characters_per_play: int = HELD_OUT_CHARACTERS_PER_PLAY) -> list[str]:
    """The middle ``characters_per_play`` characters of each of chapter 9's four held-out plays.

    The book's comparison of language models (chapter 15) reads these 4 x 25,000 = 100,000
    characters: the middle of each play, clear of the title and the list of characters, in
    the order of :data:`~transformer_intro.datasets.shakespeare.VALIDATION_PLAYS`.

    Raises:
        ValueError: if a play is shorter than ``characters_per_play``.
    """
    passages = []
    for name in VALIDATION_PLAYS:
        play = load_play(name)
        if len(play) < characters_per_play:
            raise ValueError(
                f"{name} has {len(play):,} characters, fewer than the {characters_per_play:,} asked"
            )
        start = (len(play) - characters_per_play) // 2
        passages.append(play[start : start + characters_per_play])
    return passages


# ---------------------------------------------------------------------------------------------
# Intervals for a proportion
# ---------------------------------------------------------------------------------------------


def _check_counts(successes, trials, confidence: float) -> None:
    if int(trials) != trials or trials < 1:
        raise ValueError(f"trials must be a whole number of at least 1, got {trials}")
    if int(successes) != successes or not 0 <= successes <= trials:
        raise ValueError(
            f"successes must be a whole number between 0 and trials ({trials}), got {successes}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _normal_quantile(p: float) -> float:
    """The normal quantile: z with Phi(z) = p, by bisection on math.erf (no SciPy needed)."""
    low, high = -40.0, 40.0
    for _ in range(200):
        middle = (low + high) / 2
        if 0.5 * (1 + math.erf(middle / math.sqrt(2))) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def wilson_interval(successes, trials, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion: k successes in n trials.

    The proportions p whose normal test against k/n does not reject at the given level:
    ``(k/n + z²/2n ± z sqrt(k/n (1 - k/n)/n + z²/4n²)) / (1 + z²/n)``, z the normal
    quantile at (1 + confidence)/2 (1.96 for 95%). Unlike the textbook k/n ± z se, it stays
    inside [0, 1] and is not empty at 0 or n successes.

    Args:
        successes: k, a whole number between 0 and n.
        trials: n, a whole number, at least 1.
        confidence: the interval's level, 0.95 by default.

    Returns:
        (low, high), proportions in [0, 1].

    Raises:
        ValueError: if n < 1, k is not in 0..n, or confidence is not in (0, 1).
    """
    _check_counts(successes, trials, confidence)
    z = _normal_quantile((1 + confidence) / 2)
    n, p = trials, successes / trials
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def clopper_pearson_interval(successes, trials, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson ("exact") interval for a proportion: k successes in n trials.

    The proportions p for which neither tail of the binomial distribution at k has probability
    below (1 - confidence)/2: the low end is the a/2 quantile of Beta(k, n - k + 1), the high
    end the 1 - a/2 quantile of Beta(k + 1, n - k), with a = 1 - confidence (0 and 1 at k = 0
    and k = n). It covers the true proportion at least as often as asked, so it is usually
    wider than :func:`wilson_interval`, whose coverage is close to the level asked on average.

    Raises:
        ValueError: as :func:`wilson_interval`.
    """
    from scipy.stats import beta

    _check_counts(successes, trials, confidence)
    alpha = 1 - confidence
    k, n = successes, trials
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high
