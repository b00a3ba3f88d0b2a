"""The character language model: causality, targets, the key-value cache, sampling, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro import Vocabulary
from transformer_intro.datasets.shakespeare import (
    VALIDATION_PLAYS,
    load_play,
    load_shakespeare,
    play_names,
)
from transformer_intro.models.generation import (
    cached_logits,
    complete,
    generate,
    generate_ids,
    sample_token,
)
from transformer_intro.models.language_model import LanguageModel
from transformer_intro.tasks import (
    NextSymbolPrediction,
    evaluation_windows,
    inputs_and_targets,
    random_windows,
)
from transformer_intro.training import Recipe, fit, load_checkpoint, save_checkpoint


def small_model(positions="rotary", window=12, seed=0):
    config = tiny_lm(
        vocab_size=11,
        window=window,
        num_blocks=2,
        block=lm_block(rotary=positions == "rotary"),
        learned_positions=positions == "learned",
    )
    model = LanguageModel(config, key=jax.random.PRNGKey(seed))
    # Larger embeddings than the training initialisation, so that every position matters visibly.
    return eqx.tree_at(lambda m: m.tokeniser.table, model, model.tokeniser.table * 50)


def symbols(n, seed=1, vocab=11):
    return jax.random.randint(jax.random.PRNGKey(seed), (n,), 0, vocab)


@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_changing_a_later_symbol_leaves_earlier_logits_unchanged(positions):
    model = small_model(positions)
    s = symbols(12)
    for n in (0, 5, 11):
        changed = s.at[n].set((s[n] + 3) % 11)
        before, after = model(s), model(changed)
        assert np.array_equal(before[:n], after[:n]), n
        assert not np.allclose(before[n:], after[n:])  # the change is seen from position n on
    # Negative control: without the causal mask the future leaks into every position.
    changed = s.at[11].set((s[11] + 3) % 11)
    assert not np.allclose(model(s, causal=False)[:11], model(changed, causal=False)[:11])


def test_targets_are_the_inputs_shifted_by_one():
    windows = jnp.arange(2 * 6).reshape(2, 6)
    inputs, targets = inputs_and_targets(windows)
    assert inputs.shape == targets.shape == (2, 5)
    np.testing.assert_array_equal(targets[:, :-1], inputs[:, 1:])
    np.testing.assert_array_equal(inputs, windows[:, :5])
    np.testing.assert_array_equal(targets, windows[:, 1:])
    # Random windows are runs of consecutive symbols of the text.
    text = jnp.arange(100)
    w = random_windows(text, jax.random.PRNGKey(0), 8, 7)
    np.testing.assert_array_equal(jnp.diff(w, axis=1), 1)


def test_loss_is_the_mean_negative_log_probability_of_the_next_symbol():
    model = small_model()
    windows = jax.random.randint(jax.random.PRNGKey(3), (2, 9), 0, 11)
    loss, _ = NextSymbolPrediction(np.arange(20) % 11, window=8).loss(model, windows)
    log_p = jax.nn.log_softmax(jax.vmap(model)(windows[:, :-1]))
    by_hand = -np.mean([log_p[b, n, windows[b, n + 1]] for b in range(2) for n in range(8)])
    np.testing.assert_allclose(loss, by_hand, rtol=1e-5)


@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_batched_equals_vmap_of_one_sequence(positions):
    model = small_model(positions)
    batch = jax.random.randint(jax.random.PRNGKey(4), (3, 12), 0, 11)
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(model.batched(batch), jax.vmap(model)(batch), atol=1e-5)
        # Negative control: a different batch is told apart.
        assert not np.allclose(model.batched(batch), jax.vmap(model)(batch[::-1]), atol=1e-3)


@pytest.mark.parametrize("positions", ["rotary", "learned"])
@pytest.mark.parametrize("prefill", [1, 5, 12])
def test_cached_logits_equal_the_full_causal_pass(positions, prefill):
    model = small_model(positions)
    s = symbols(12)
    with jax.default_matmul_precision("highest"):
        full = model(s)
        np.testing.assert_allclose(cached_logits(model, s, prefill), full, atol=1e-5)
        if prefill < 12:
            # Negative control: writing to the wrong cache position is caught.
            first, cache = model.extend(s[:prefill], model.empty_cache(), 0)
            wrong, _ = model.extend(s[prefill : prefill + 1], cache, prefill + 1)
            assert np.abs(wrong[0] - full[prefill]).max() > 1e-3


def test_prefill_equals_the_attention_under_a_causal_mask():
    from transformer_intro import causal_mask

    attention = small_model().blocks[0].attention
    x = jax.random.normal(jax.random.PRNGKey(5), (7, 16))
    with jax.default_matmul_precision("highest"):
        y, (keys, values) = attention.extend(x, attention.empty_cache(12), 0)
        np.testing.assert_allclose(y, attention(x, causal_mask(7)), atol=1e-5)
        assert not np.allclose(y, attention(x), atol=1e-3)  # no mask: the control differs
    assert keys.shape == (2, 12, 8) and not np.any(keys[:, 7:])  # slots after the prefill untouched


def test_cached_and_uncached_generation_agree_and_sampling_is_reproducible():
    model = small_model(window=16)
    prompt = symbols(4)
    key = jax.random.PRNGKey(7)
    cached = generate(model, prompt, 12, key, temperature=1.0)  # fills the window exactly
    again = generate(model, prompt, 12, key, temperature=1.0)
    uncached = generate(model, prompt, 12, key, temperature=1.0, cache=False)
    np.testing.assert_array_equal(cached, again)
    np.testing.assert_array_equal(cached, uncached)
    assert not np.array_equal(cached, generate(model, prompt, 12, jax.random.PRNGKey(8)))
    # Past the window both keep going (different ways of forgetting the oldest symbols).
    long = generate(model, prompt, 40, key)
    assert long.shape == (40,) and np.array_equal(long[:12], cached)


def test_temperature_to_zero_is_greedy_decoding():
    model = small_model()
    prompt = symbols(3)
    greedy = generate(model, prompt, 9, jax.random.PRNGKey(0), temperature=0.0)
    cold = generate(model, prompt, 9, jax.random.PRNGKey(1), temperature=1e-4)
    np.testing.assert_array_equal(greedy, cold)
    # Greedy decoding by hand: the argmax of the full pass, one symbol at a time. The model is
    # causal, so zeros after the context leave the context's logits as they are, and one
    # compiled pass over the whole window serves every length.
    full_pass = eqx.filter_jit(lambda m, ids: m(ids))
    context = list(np.asarray(prompt))
    for _ in range(9):
        padded = np.zeros(model.config.window, np.int32)
        padded[: len(context)] = context
        context.append(int(jnp.argmax(full_pass(model, padded)[len(context) - 1])))
    np.testing.assert_array_equal(greedy, context[3:])
    # Negative control: at temperature 1 the samples are not the greedy ones.
    warm = generate(model, prompt, 9, jax.random.PRNGKey(1), temperature=5.0)
    assert not np.array_equal(greedy, warm)


def test_top_k_samples_only_the_k_likeliest():
    logits = jnp.array([0.0, 3.0, 1.0, 2.0, -1.0])
    draws = jax.vmap(lambda k: sample_token(logits, k, 1.0, 2))(
        jax.random.split(jax.random.PRNGKey(0), 500)
    )
    assert set(np.unique(draws)) == {1, 3}
    draws = jax.vmap(lambda k: sample_token(logits, k, 1.0))(
        jax.random.split(jax.random.PRNGKey(0), 500)
    )
    assert len(np.unique(draws)) == 5
    with pytest.raises(ValueError, match="top_k"):
        sample_token(logits, jax.random.PRNGKey(0), 1.0, 6)


def kept_tokens(logits, **options) -> set[int]:
    """The tokens among 4000 draws at temperature 1 (every kept token here has a probability of
    at least 0.05, so each is drawn about 200 times or more)."""
    draws = jax.vmap(lambda k: sample_token(logits, k, 1.0, **options))(
        jax.random.split(jax.random.PRNGKey(0), 4000)
    )
    return set(np.unique(np.asarray(draws)).tolist())


def test_top_k_and_top_p_keep_what_transformers_keeps():
    torch = pytest.importorskip("torch")
    warpers = pytest.importorskip("transformers.generation.logits_process")
    logits = jnp.array([2.0, 1.5, 1.0, 0.9, 0.5, 0.0, -1.0, -3.0])
    reference = torch.tensor(np.asarray(logits))[None]
    for p in (0.3, 0.6, 0.8, 0.95):
        expected = warpers.TopPLogitsWarper(top_p=p)(None, reference.clone())
        expected = set(np.flatnonzero(np.isfinite(expected[0].numpy())).tolist())
        assert kept_tokens(logits, top_p=p) == expected, p
    both = warpers.TopPLogitsWarper(top_p=0.95)(
        None, warpers.TopKLogitsWarper(top_k=3)(None, reference.clone())
    )
    expected = set(np.flatnonzero(np.isfinite(both[0].numpy())).tolist())
    assert kept_tokens(logits, top_k=3, top_p=0.95) == expected == {0, 1, 2}
    # Negative control: keeping tokens while the sum *including* each stays below p is a
    # different rule, and the comparison with transformers rejects it.
    probabilities = np.cumsum(np.asarray(jax.nn.softmax(logits)))
    half = warpers.TopPLogitsWarper(top_p=0.5)(None, reference.clone())
    expected = set(np.flatnonzero(np.isfinite(half[0].numpy())).tolist())
    assert set(np.flatnonzero(probabilities < 0.5).tolist()) != expected
    assert kept_tokens(logits, top_p=0.5) == expected
    with pytest.raises(ValueError, match="top_p"):
        generate(small_model(), symbols(3), 2, jax.random.PRNGKey(0), top_p=0.0)


def test_both_entry_points_decode_the_same_tokens():
    # generate (chapter 9's) and generate_ids (chapter 15's, with a padded prompt and a cache
    # sized to the tokens) share prefill and decode: greedily they agree token for token.
    model = small_model()
    prompt = symbols(3)
    by_generate = generate(model, prompt, 8, jax.random.PRNGKey(0), temperature=0.0)
    np.testing.assert_array_equal(generate_ids(model, prompt, 8), by_generate)
    key = jax.random.PRNGKey(3)
    sampled = generate(model, prompt, 8, key, temperature=0.8, top_k=5)
    np.testing.assert_array_equal(
        generate_ids(model, prompt, 8, temperature=0.8, top_k=5, key=key), sampled
    )


def test_bad_input_is_a_clear_error():
    vocabulary = Vocabulary.from_text("abc ")
    model = small_model()
    with pytest.raises(ValueError, match="'z'"):
        complete(model, vocabulary, "a z", 3, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="empty"):
        complete(model, vocabulary, "", 3, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="empty"):
        model(jnp.zeros(0, jnp.int32))
    with pytest.raises(ValueError, match="window of 12"):
        model(symbols(13))
    with pytest.raises(ValueError, match="window of 12"):
        generate(model, symbols(13), 3, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="window of 12"):
        model.batched(jnp.zeros((2, 13), jnp.int32))
    with pytest.raises(ValueError, match="temperature"):
        generate(model, symbols(3), 3, jax.random.PRNGKey(0), temperature=-1.0)


def test_a_few_training_steps_lower_the_loss():
    model = small_model(window=8)
    text = np.tile(np.arange(11), 50)  # 0, 1, ..., 10, 0, 1, ...: easy
    task = NextSymbolPrediction(
        text, window=8, validation_ids=text, num_validation_windows=16, eval_chunk=16
    )
    recipe = Recipe(steps=60, batch_size=16, learning_rate=1e-2, warmup_steps=5, clip_norm=1.0)
    before = task.evaluate(model)["nats_per_symbol"]
    model, history = fit(model, task, recipe, progress=False)
    assert task.evaluate(model)["nats_per_symbol"] < 0.2 * before and history.step[-1] == 60
    assert evaluation_windows(text, 16, 9).shape == (16, 9)


def test_shakespeare_splits_hold_out_whole_plays():
    names = play_names()
    assert len(names) == 42 and set(VALIDATION_PLAYS) <= set(names)
    train, validation = load_shakespeare("train"), load_shakespeare("validation")
    assert 0.09 < len(validation) / (len(train) + len(validation)) < 0.11
    assert load_play("hamlet")[:40] in validation and load_play("hamlet")[:40] not in train
    vocabulary = Vocabulary.from_text(train)
    assert len(vocabulary) == 84
    vocabulary.encode(validation)  # every validation symbol occurs in training
    with pytest.raises(ValueError, match="no play named"):
        load_play("cardenio")
    with pytest.raises(ValueError, match="split"):
        load_shakespeare("test")


def test_checkpoint_round_trip(tmp_path):
    model, vocabulary = small_model(), Vocabulary.from_text("abcdefghij ")
    path = save_checkpoint(tmp_path / "lm.eqx", model, extra={"symbols": list(vocabulary.symbols)})
    loaded, info = load_checkpoint(path)
    assert loaded.config == model.config
    assert Vocabulary(info.extra["symbols"]).symbols == vocabulary.symbols
    s = symbols(12)
    np.testing.assert_array_equal(loaded(s), model(s))
    assert not np.allclose(small_model(seed=1)(s), model(s))  # another model differs
