"""SmolLM2-135M-Instruct run by the book's layers, checked against Hugging Face transformers
loading the same GGUF file: token ids, chat template, logits and greedy continuations.

Skipped when the GGUF file is absent (``transformer_intro.pretrained.download_smollm2()`` fetches
it) or when torch and transformers are not installed.
"""

import functools
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.bpe import BytePairEncoding
from transformer_intro.models import LanguageModel
from transformer_intro.models.quantised import dequantise_model
from transformer_intro.positions import half_to_interleaved
from transformer_intro.pretrained import (
    SMOLLM2_135M,
    find_smollm2,
    generate_ids,
    generate_text,
    load_smollm2,
)
from transformer_intro.pretrained.gguf import quantised_model_from_gguf
from transformer_intro.pretrained.tokeniser import BYTE_LEVEL_PATTERN
from transformer_intro.xla_flags import LOOP_EMITTERS_OPTION

try:
    GGUF = find_smollm2()
except FileNotFoundError:
    pytest.skip("the SmolLM2 GGUF file is not available", allow_module_level=True)
if not GGUF.is_file():
    pytest.skip("these tests compare the GGUF file", allow_module_level=True)
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

STRINGS = [
    "Hello, world!",
    "I'm sure they'll say it's fine, don't you think?",
    "ça coûte 12 345,67 € — très cher",
    "日本語のテキストと絵文字 🙂👍🏽",
    "  two  spaces\n\n\tand a tab\n",
    "def f(x):\n    return x ** 2  # square\n",
    "<|im_start|>user\nHi<|im_end|>\n",
    "Ünïcödé naïve café, Ελληνικά, русский, עברית, العربية",
]
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]

# Running the 135-million-parameter model, not compiling it, is what takes this file's time.
pytestmark = pytest.mark.optimised_programs

PROMPTS = [
    ("The three primary colours are", False),
    ("Once upon a time, in a small village by the sea,", False),
    ("Give me three tips for learning to cook.", True),
]


@pytest.fixture(scope="module")
def ours():
    return load_smollm2(GGUF)


@pytest.fixture(scope="module")
def reference():
    # One thread: beside the test suite's other process on two cores, a team of two threads
    # waits spinning for the core the other process holds (30 greedy tokens: 2.3 s with one
    # thread, 18 to 53 s with two).
    torch.set_num_threads(1)
    import gguf  # transformers' reader of the file, imported where transformers uses it

    # transformers parses the file's header anew for the tokeniser, the configuration and the
    # weights, and rebuilds a table of tensor names for each of the 272 tensors: one parse and one
    # table serve them all (40 s of loading becomes about 20 on two cores). Only the time changes:
    # the same code reads the same bytes.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", functools.cache(gguf.GGUFReader))
        patch.setattr(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map))
        tokenizer = transformers.AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            GGUF.parent, gguf_file=GGUF.name, dtype=torch.float32
        )
    model.eval()
    return model, tokenizer


def test_token_ids_match_transformers(ours, reference):
    _, tokenizer = ours
    _, hf_tokenizer = reference
    for text in STRINGS:
        ids = tokenizer.encode(text)
        assert ids == hf_tokenizer.encode(text), text
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode("<|im_end|>") == [2]
    assert tokenizer.encode("<|im_end|>", specials="none") != [2]


def test_model_and_tokeniser_are_the_books_own(ours):
    assert not jax.config.values["jax_disable_most_optimizations"]  # pytestmark above
    from jax._src import compiler  # and XLA's default emitters (tests/conftest.py)

    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    assert LOOP_EMITTERS_OPTION not in options.env_option_overrides
    model, tokenizer = ours
    assert isinstance(model, LanguageModel) and model.config == SMOLLM2_135M
    assert isinstance(tokenizer, BytePairEncoding) and tokenizer.pattern == BYTE_LEVEL_PATTERN
    assert len(tokenizer) == SMOLLM2_135M.vocab_size == 49_152
    # The vocabulary numbers its 17 special tokens first, then 235 bytes and 48,900 merges.
    assert sorted(tokenizer.special_tokens.values()) == list(range(17))
    assert (tokenizer.num_bytes, len(tokenizer.merges)) == (235, 48_900)
    with pytest.raises(ValueError, match="not in this tokeniser's vocabulary"):
        tokenizer.encode("\x04")  # a byte SmolLM2's training text never had


def test_chat_template_matches_transformers(ours, reference):
    _, tokenizer = ours
    _, hf_tokenizer = reference
    text = tokenizer.apply_chat_template(MESSAGES)
    assert text == hf_tokenizer.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True
    )
    hf_ids = hf_tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    hf_ids = (
        hf_ids["input_ids"] if isinstance(hf_ids, dict | transformers.BatchEncoding) else hf_ids
    )
    assert tokenizer.encode(text) == list(hf_ids)


forward = eqx.filter_jit(lambda model, ids: model(ids))


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_logits_match_transformers(ours, reference):
    model, tokenizer = ours
    hf_model, _ = reference
    ids = tokenizer.encode(tokenizer.apply_chat_template(MESSAGES))
    expected = hf_logits(hf_model, ids)
    with jax.default_matmul_precision("highest"):
        logits = np.asarray(forward(model, jnp.asarray(ids)))
    assert np.abs(logits - expected).max() < 1e-3
    # Negative control: the GGUF file's own row order of U_q (interleaved pairs) in one block,
    # used with the half-split rotation, breaks the agreement.
    q = model.blocks[0].attention.query_projections
    gguf_order = eqx.tree_at(
        lambda m: m.blocks[0].attention.query_projections, model, q[:, half_to_interleaved(64)]
    )
    with jax.default_matmul_precision("highest"):
        wrong = np.asarray(forward(gguf_order, jnp.asarray(ids)))
    assert np.abs(wrong - expected).max() > 1e-2


def test_greedy_continuations_match_transformers(ours, reference):
    model, tokenizer = ours
    hf_model, hf_tokenizer = reference
    for prompt, chat in PROMPTS:
        text = (
            tokenizer.apply_chat_template([{"role": "user", "content": prompt}]) if chat else prompt
        )
        ids = tokenizer.encode(text)
        with torch.no_grad():
            hf = hf_model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=30,
                do_sample=False,
                pad_token_id=hf_tokenizer.eos_token_id,
            )[0, len(ids) :].tolist()
        new = generate_ids(model, ids, 30).tolist()
        # transformers stops at the end token; up to there the two must agree token for token.
        assert new[: len(hf)] == hf, prompt
        assert len(hf) == 30 or hf[-1] == tokenizer.eos_id


def test_the_quantised_model_is_the_files_weights_and_answers_the_same(ours):
    model, tokenizer = ours
    quantised = quantised_model_from_gguf(GGUF)
    # its blocks are the file's: turned back into floats, the float loader's model, bit for bit
    same = jax.tree.map(
        lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)),
        dequantise_model(quantised),
        model,
    )
    assert all(jax.tree.leaves(same))
    held = sum(a.nbytes for a in jax.tree.leaves(quantised))
    assert held < 0.2 * sum(a.nbytes for a in jax.tree.leaves(model))
    prompt, _ = PROMPTS[2]
    ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": prompt}]))
    answer = generate_ids(model, ids, 30).tolist()
    assert generate_ids(quantised, ids, 30).tolist() == answer
    # the blocks stacked and scanned, each step reading its matrices in the stack: the same
    scanned = quantised_model_from_gguf(GGUF, scan_blocks=True)
    assert generate_ids(scanned, ids, 30).tolist() == answer
    ids = jnp.asarray(tokenizer.encode(PROMPTS[0][0]))
    got, _ = eqx.filter_jit(lambda m, s: m.extend(s, m.empty_cache(64), 0))(quantised, ids)
    expected = model(ids)
    assert np.abs(np.asarray(got) - np.asarray(expected)).max() < 2e-3 * np.abs(expected).max()


def test_with_q8_0_vectors_the_quantised_model_stays_near_the_float_model(ours):
    model, tokenizer = ours
    rounded = quantised_model_from_gguf(GGUF, vector_format="Q8_0")
    # the three prompts one after another: one sequence, so one program of each model
    ids = jnp.asarray(sum((tokenizer.encode(prompt) for prompt, _ in PROMPTS), []))
    got, _ = eqx.filter_jit(lambda m, s: m.extend(s, m.empty_cache(64), 0))(rounded, ids)
    got, expected = np.asarray(got), np.asarray(model(ids))
    error = np.abs(got - expected).max() / np.abs(expected).max()
    # measured: 5.5e-2 to 7.1e-2 of the largest logit (the kernel, XLA's paths); the float
    # vectors' is under 1e-5
    assert 1e-3 < error < 0.1
    agree = (got.argmax(-1) == expected.argmax(-1)).sum()
    assert agree >= 0.9 * len(ids)  # the likeliest next token (measured: 26 of 27)


def test_scan_blocks_loads_the_float_model_stacked(ours):
    model, _ = ours
    stacked, _ = load_smollm2(GGUF, scan_blocks=True)
    assert stacked.config.scan_blocks and not model.config.scan_blocks
    each = [jax.tree.leaves(block) for block in model.blocks]
    leaves = jax.tree.leaves(stacked.blocks)
    assert len(leaves) == len(each[0])
    for i, leaf in enumerate(leaves):  # one stack at a time: the model is 540 MB
        assert np.array_equal(np.asarray(leaf), np.stack([np.asarray(b[i]) for b in each]))
    assert np.array_equal(stacked.tokeniser.table, model.tokeniser.table)


def test_generate_text_answers_and_checks_its_arguments(ours):
    model, tokenizer = ours
    # 30 tokens and a chat prompt of under 64 tokens: the compilation the test above made.
    answer = generate_text(model, tokenizer, "What is the capital of France?", 30)
    assert "Paris" in answer and "<|im_end|>" not in answer
    sampled = generate_text(
        model, tokenizer, "Name a colour.", 30, temperature=1.0, key=jax.random.PRNGKey(1)
    )
    assert isinstance(sampled, str)
    with pytest.raises(ValueError, match="PRNG key"):
        generate_text(model, tokenizer, "Hi", 4, temperature=0.7)
    with pytest.raises(ValueError, match="num_tokens"):
        generate_text(model, tokenizer, "Hi", 0)


def test_hugging_face_folder_loads_the_same_model(ours, reference, tmp_path):
    """``load_smollm2`` on a folder as Hugging Face publishes it: ``model.safetensors`` in
    bfloat16, ``config.json``, ``tokenizer.json``, written here from transformers' model."""
    model, tokenizer = ours
    hf_model, hf_tokenizer = reference
    # transformers will not save a model it read from GGUF, so its state dict is written as
    # the published checkpoint is: bfloat16, without the read-out, which is the token table.
    from safetensors.torch import save_file

    state = {
        name: value.to(torch.bfloat16).contiguous()
        for name, value in hf_model.state_dict().items()
        if name != "lm_head.weight"
    }
    save_file(state, tmp_path / "model.safetensors")
    hf_model.config.to_json_file(tmp_path / "config.json")
    hf_tokenizer.save_pretrained(tmp_path)
    folder_model, folder_tokenizer = load_smollm2(tmp_path)
    for text in STRINGS:
        assert folder_tokenizer.encode(text) == tokenizer.encode(text)
    assert folder_tokenizer.apply_chat_template(MESSAGES) == tokenizer.apply_chat_template(MESSAGES)
    # bfloat16 keeps 8 bits of each weight: every weight within a relative 2^-8 of ours.
    ours_leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    folder_leaves = jax.tree_util.tree_leaves(eqx.filter(folder_model, eqx.is_inexact_array))
    assert len(ours_leaves) == len(folder_leaves)
    for a, b in zip(ours_leaves, folder_leaves, strict=True):
        assert a.shape == b.shape
        assert np.all(np.abs(np.asarray(a) - np.asarray(b)) <= 2**-8 * np.abs(np.asarray(a)))
    # A weight swapped between two blocks is caught by the same comparison.
    swapped = eqx.tree_at(
        lambda m: m.blocks[0].mlp.up.weight, folder_model, folder_model.blocks[1].mlp.up.weight
    )
    a, b = model.blocks[0].mlp.up.weight, swapped.blocks[0].mlp.up.weight
    assert not np.all(np.abs(np.asarray(a) - np.asarray(b)) <= 2**-8 * np.abs(np.asarray(a)))


def test_gguf_tensors_are_read_on_lookup():
    from transformer_intro.pretrained.gguf import read_gguf
    from transformer_intro.pretrained.state_dict import LazyTensors

    tensors, metadata = read_gguf(GGUF)
    assert isinstance(tensors, LazyTensors)
    assert len(tensors) == 272 and "blk.0.attn_q.weight" in tensors
    assert "blk.0.attn_q.bias" not in tensors
    first, again = tensors["blk.0.attn_q.weight"], tensors["blk.0.attn_q.weight"]
    assert first.shape == (576, 576) and first.dtype == np.float32
    assert first is not again and np.array_equal(first, again)  # computed, not kept


def test_the_books_gguf_reader_reads_the_file_as_gguf_does():
    import gguf

    from transformer_intro.pretrained.gguf import GGUFFile

    ours, theirs = GGUFFile(GGUF), gguf.GGUFReader(str(GGUF))
    fields = {n: f.contents() for n, f in theirs.fields.items() if not n.startswith("GGUF.")}
    assert ours.metadata == fields and len(fields["tokenizer.ggml.tokens"]) == 49_152
    for mine, reference in zip(ours.tensors, theirs.tensors, strict=True):
        assert (mine.name, mine.tensor_type) == (reference.name, reference.tensor_type)
        assert mine.data_offset == reference.data_offset and mine.n_bytes == reference.n_bytes
        assert tuple(mine.shape) == tuple(int(n) for n in reference.shape)
    assert np.array_equal(ours.tensors[-1].data, theirs.tensors[-1].data.view(np.uint8).ravel())


def test_the_loaded_model_keeps_no_view_of_the_file():
    """Once loaded, the model holds copies: the file is unmapped (its 94 MB leave memory)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import gc
        from transformer_intro.pretrained import load_smollm2
        from transformer_intro.pretrained.gguf import read_gguf
        tensors, _ = read_gguf({str(GGUF)!r})
        mapped = lambda: {GGUF.name!r} in open("/proc/self/maps").read()
        print(mapped())  # the reader maps the file
        del tensors
        model, tokenizer = load_smollm2({str(GGUF)!r})
        gc.collect()
        print(mapped())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False"]


def _resident_mib(path) -> float:
    """How much of the file's mappings this process holds in memory (Linux's smaps), in MiB."""
    path, total, inside = os.path.realpath(path), 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if not fields[0].endswith(":"):  # a mapping's first line: addresses ... path
                inside = fields[-1] == path
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])  # kB
    return total / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads /proc/self/smaps")
def test_reading_a_tensor_gives_its_pages_of_the_file_back():
    """After the loader's reads little of the file is held (its header, 8 MiB); plain reads hold
    nearly all of its 94 MiB."""
    import gguf

    from transformer_intro.pretrained.gguf import dequantise, read_gguf

    file_mib = GGUF.stat().st_size / 2**20
    # Other tests' objects (transformers' reader, with pytest-randomly's order) may map the file
    # too: what counts is what these reads add.
    before = _resident_mib(GGUF)
    tensors, _ = read_gguf(GGUF)
    for name in tensors:
        tensors[name]
    assert _resident_mib(GGUF) - before < 0.2 * file_mib
    del tensors
    # Negative control: the same reads, with the pages left in place.
    before = _resident_mib(GGUF)
    reader = gguf.GGUFReader(str(GGUF))
    for tensor in reader.tensors:
        dequantise(tensor)
    assert _resident_mib(GGUF) - before > 0.8 * file_mib
