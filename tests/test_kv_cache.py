"""The key-value cache beyond one prompt: kept across a conversation, its size, a sliding window.

A conversation whose cache is kept between turns must give, at every token, the logits of the
model run on the whole conversation at once (an uncached pass, which shares no code with the
cache), and the greedy replies of refilling the cache from the whole conversation
(``generate_ids``); a cache taken from another conversation must not. The SmolLM2 test at the end
does the same with the pretrained model and its chat template.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.models.generation import generate_ids
from transformer_intro.models.kv_cache import (
    Conversation,
    cache_bytes,
    sliding_window_mask,
    windowed_logits,
)
from transformer_intro.models.language_model import LanguageModel


def small_model(num_blocks=2, num_kv_heads=2, window=96, seed=0):
    block = lm_block(
        32, 4, 64, num_kv_heads=num_kv_heads, norm="rms", mlp="gated", activation="silu",
        mlp_bias=False,
    )  # fmt: skip
    config = tiny_lm(vocab_size=23, window=window, num_blocks=num_blocks, block=block)
    model = LanguageModel(config, key=jax.random.PRNGKey(seed))
    # Larger embeddings than the training initialisation, so that every position matters visibly
    # and greedy choices are not near-ties.
    return eqx.tree_at(lambda m: m.tokeniser.table, model, model.tokeniser.table * 50)


def turn(n, seed, vocab=23):
    return np.asarray(jax.random.randint(jax.random.PRNGKey(seed), (n,), 0, vocab))


# A conversation of three turns: the user's tokens, then the reply's length.
TURNS = [(turn(11, 1), 9), (turn(5, 2), 12), (turn(20, 3), 7)]


def run_conversation(model, turns, cache_step=16, stop=()):
    conversation = Conversation(model, cache_step=cache_step)
    record = []  # per turn: ids before the reply, the logits after the turn, reply, its logits
    for user, length in turns:
        after_turn = conversation.add(user)
        before = list(conversation.ids)
        reply, drawn_from = conversation.reply(length, stop=stop)
        record.append((before, after_turn, reply, drawn_from))
    return conversation, record


def test_kept_cache_gives_the_whole_conversations_logits_and_refilled_replies():
    model = small_model()
    with jax.default_matmul_precision("highest"):
        conversation, record = run_conversation(model, TURNS)
        everything = np.asarray(model(jnp.asarray(conversation.ids)))  # no cache at all
        for before, after_turn, reply, drawn_from in record:
            n = len(before)
            np.testing.assert_allclose(after_turn, everything[n - 1], atol=1e-4, rtol=1e-4)
            rows = everything[n - 1 : n - 1 + len(reply)]
            np.testing.assert_allclose(drawn_from, rows, atol=1e-4, rtol=1e-4)
            np.testing.assert_array_equal(reply, rows.argmax(-1))
            # refilling the cache from the whole conversation: the same greedy reply
            np.testing.assert_array_equal(reply, generate_ids(model, before, len(reply)))
    # the cache grew (16 positions at a time) past its first size, and still agreed
    assert conversation.cache_length == 64 >= len(conversation.ids) > 48
    # each token went through the model once; refilling runs every earlier token again
    assert conversation.tokens_processed == len(conversation.ids)
    refilled = sum(len(before) + len(reply) for before, _, reply, _ in record)
    assert refilled > conversation.tokens_processed


def test_a_cache_from_another_conversation_gives_other_logits():
    model = small_model()
    with jax.default_matmul_precision("highest"):
        conversation, _ = run_conversation(model, TURNS[:2])
        other, _ = run_conversation(model, [(turn(11, 7), 9), (turn(5, 8), 12)])
        assert len(other.ids) == len(conversation.ids)
        expected = np.asarray(model(jnp.asarray(conversation.ids + turn(6, 4).tolist())))[-1]
        other.ids = list(conversation.ids)  # the same tokens on record, the other's cache
        swapped = np.asarray(other.add(turn(6, 4)))
        kept = np.asarray(conversation.add(turn(6, 4)))
    np.testing.assert_allclose(kept, expected, atol=1e-4, rtol=1e-4)
    assert np.abs(swapped - expected).max() > 0.1


def test_a_reply_stops_after_a_stop_token_and_the_next_turn_follows_it():
    model = small_model()
    with jax.default_matmul_precision("highest"):
        free = Conversation(model)
        free.add(TURNS[0][0])
        tokens, _ = free.reply(12)
        stop = int(tokens[3])  # a token the reply draws; its first occurrence ends the reply
        first = int(np.flatnonzero(tokens == stop)[0])
        conversation, record = run_conversation(model, TURNS, stop=(stop,))
        everything = np.asarray(model(jnp.asarray(conversation.ids)))
    reply = record[0][2]
    np.testing.assert_array_equal(reply, tokens[: first + 1])
    for before, after_turn, reply, _ in record:
        n = len(before)
        np.testing.assert_allclose(after_turn, everything[n - 1], atol=1e-4, rtol=1e-4)
        assert stop not in reply[:-1].tolist()


def test_sampled_replies_equal_generate_ids_with_the_same_key():
    model = small_model()
    key = jax.random.PRNGKey(5)
    conversation = Conversation(model)
    conversation.add(TURNS[0][0])
    before = list(conversation.ids)
    tokens, _ = conversation.reply(10, temperature=1.0, key=key)
    np.testing.assert_array_equal(tokens, generate_ids(model, before, 10, temperature=1.0, key=key))
    other = Conversation(model)
    other.add(TURNS[0][0])
    assert not np.array_equal(
        other.reply(10, temperature=1.0, key=jax.random.PRNGKey(6))[0], tokens
    )


def test_conversation_bad_input_is_a_clear_error():
    model = small_model(window=32)
    conversation = Conversation(model)
    with pytest.raises(ValueError, match="empty: add the first turn"):
        conversation.reply(4)
    with pytest.raises(ValueError, match="at least one token"):
        conversation.add([])
    conversation.add(turn(20, 1))
    with pytest.raises(ValueError, match="past the model's context of 32"):
        conversation.reply(13)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        conversation.reply(4, temperature=0.5)
    with pytest.raises(ValueError, match="cache_step"):
        Conversation(model, cache_step=0)


# ---------------------------------------------------------------------------------------------
# The cache's size


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_cache_bytes_are_the_arrays_bytes(num_kv_heads):
    model = small_model(num_blocks=3, num_kv_heads=num_kv_heads)
    for context in (1, 40, 96):
        arrays = jax.tree.leaves(model.empty_cache(context))
        assert cache_bytes(model.config, context) == sum(a.nbytes for a in arrays)
        half = jax.tree.leaves(model.empty_cache(context, jnp.bfloat16))
        assert cache_bytes(model.config, context, 2) == sum(a.nbytes for a in half)
    # the control: counting the query heads, not the key-value heads, is wrong under grouping
    ungrouped = model.config.replace(block=model.config.block.replace(num_kv_heads=None))
    assert (cache_bytes(ungrouped, 40) == cache_bytes(model.config, 40)) == (num_kv_heads == 4)


def test_cache_bytes_of_smollm2_without_its_weights():
    from transformer_intro.pretrained import SMOLLM2_135M

    # the model's shapes only (no weights are made); the cache itself is real zeros
    shapes = eqx.filter_eval_shape(LanguageModel, SMOLLM2_135M, key=jax.random.PRNGKey(0))
    arrays = jax.tree.leaves(shapes.empty_cache(1024))
    assert sum(a.nbytes for a in arrays) == cache_bytes(SMOLLM2_135M, 1024)
    assert cache_bytes(SMOLLM2_135M, 1) == 2 * 30 * 3 * 64 * 4


# ---------------------------------------------------------------------------------------------
# A sliding window


def test_sliding_window_mask_by_enumeration():
    for n, w in ((7, 1), (7, 3), (7, 7), (7, 10)):
        mask = np.asarray(sliding_window_mask(n, w))
        for i in range(n):
            for j in range(n):
                assert mask[i, j] == (j - w < i <= j), (n, w, i, j)
    with pytest.raises(ValueError, match="at least one position"):
        sliding_window_mask(4, 0)


def test_a_full_window_is_the_causal_model():
    model = small_model()
    symbols = jnp.asarray(turn(40, 9))
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(
            windowed_logits(model, symbols, 40), model(symbols), atol=1e-5, rtol=1e-5
        )


def test_one_blocks_window_reads_only_its_last_positions():
    # With one block and rotary positions (which see only differences of positions), position n
    # with a window of w computes what the model computes on the last w symbols alone.
    model = small_model(num_blocks=1)
    symbols = jnp.asarray(turn(30, 10))
    w = 6
    forward = eqx.filter_jit(LanguageModel.__call__)  # one program for every slice of w
    with jax.default_matmul_precision("highest"):
        windowed = np.asarray(windowed_logits(model, symbols, w))
        for n in range(w, 30):
            alone = np.asarray(forward(model, symbols[n - w + 1 : n + 1]))[-1]
            np.testing.assert_allclose(windowed[n], alone, atol=1e-4, rtol=1e-4)
        # the control: one symbol more is another computation
        longer = np.asarray(model(symbols[20 - w : 21]))[-1]
    assert np.abs(windowed[20] - longer).max() > 1e-2
    # with two blocks, position n hears from further back than its window (through the blocks)
    two = small_model(num_blocks=2)
    with jax.default_matmul_precision("highest"):
        deep = np.asarray(windowed_logits(two, symbols, w))[20]
        alone = np.asarray(two(symbols[20 - w + 1 : 21]))[-1]
    assert np.abs(deep - alone).max() > 1e-2


# ---------------------------------------------------------------------------------------------
# SmolLM2, its chat template and a kept cache


@pytest.mark.optimised_programs
def test_smollm2_chat_keeps_its_cache_and_equals_the_refill():
    from transformer_intro.pretrained import Chat, find_smollm2, generate_text, load_smollm2

    try:
        path = find_smollm2()
    except FileNotFoundError:
        pytest.skip("the SmolLM2 GGUF file is not available")
    model, tokenizer = load_smollm2(path)

    def talk(questions):
        chat, starts = Chat(model, tokenizer), []  # where each answer starts
        for question in questions:
            cached = tokenizer.decode(chat.conversation.ids)
            prompt = tokenizer.apply_chat_template(
                chat.messages + [{"role": "user", "content": question}]
            )
            starts.append(len(chat.conversation.ids) + len(tokenizer.encode(prompt[len(cached) :])))
            assert chat.say(question, 30)
        return chat, starts

    chat, starts = talk(["Give me two tips for learning to cook.", "Which of the two is easier?"])
    ids = chat.conversation.ids
    assert chat.refills == 0 and chat.conversation.tokens_processed == len(ids)
    assert [start for start, _ in chat.answer_spans] == starts
    assert chat.answer_spans[-1][1] == len(ids)
    # the whole conversation in one uncached pass: the logits of every answer's tokens
    forward = eqx.filter_jit(lambda m, x: m(x))
    everything = np.asarray(forward(model, jnp.asarray(ids)))
    ends = starts[1:] + [len(ids)]
    for turn_start, turn_end, message in zip(starts, ends, chat.messages[1::2]):
        answer = ids[turn_start:turn_end][:30]  # then the next turn's template
        if tokenizer.eos_id in answer:  # the next turn's template follows the end token
            answer = answer[: answer.index(tokenizer.eos_id) + 1]
        assert (
            everything[turn_start - 1 : turn_start - 1 + len(answer)].argmax(-1).tolist() == answer
        )
        # refilling the cache from the whole conversation so far: the same greedy answer
        refill = generate_ids(model, ids[:turn_start], len(answer)).tolist()
        assert refill == answer
        assert tokenizer.decode([t for t in answer if t != tokenizer.eos_id]) == message["content"]
    # the cache holds the template's text of the whole conversation, though not always its
    # tokens: a drawn answer, decoded and encoded again, may come back in other tokens (BPE
    # encodes a text one way; the model may draw another), and then generate_text, which
    # encodes the whole conversation's text, reads another sequence
    template = tokenizer.apply_chat_template(chat.messages[:3])
    blank_line = tokenizer.encode("\n\n")  # one token, which text before a digit never gets
    assert len(blank_line) == 1 and blank_line[0] not in tokenizer.encode("techniques.\n\n2.")
    assert tokenizer.decode(ids[: starts[1]]) == template
    if tokenizer.encode(template) == ids[: starts[1]]:
        assert generate_text(model, tokenizer, chat.messages[:3], 30) == chat.messages[3]["content"]

    # the control: the second turn read through the cache of a conversation that began with
    # another question gives other logits than the whole conversation's
    other, _ = talk(["Name three colours of the rainbow."])
    kept, swapped = Conversation(model), Conversation(model)
    kept.add(ids[: starts[0]])
    swapped.cache, swapped.ids = other.conversation.cache, ids[: starts[0]]
    expected = everything[starts[1] - 1]
    np.testing.assert_allclose(
        np.asarray(kept.add(ids[starts[0] : starts[1]])), expected, atol=1e-3
    )
    assert np.abs(np.asarray(swapped.add(ids[starts[0] : starts[1]])) - expected).max() > 1.0
