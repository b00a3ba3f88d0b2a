"""Block quantisation (Q8_0, Q4_1): the bytes of llama.cpp's quantisers, the two products, and a
language model whose matrices stay in blocks."""

from __future__ import annotations

import os
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro import quantisation
from transformer_intro.attention import MultiHeadSelfAttention
from transformer_intro.models import LanguageModel
from transformer_intro.models.generation import generate_ids
from transformer_intro.models.quantised import (
    QuantisedSelfAttention,
    dequantise_model,
    quantise_model,
)
from transformer_intro.pretrained import load_smollm2
from transformer_intro.pretrained.llama import llama_config
from transformer_intro.quantisation import (
    FORMATS,
    QuantisedMatrix,
    from_gguf_blocks,
    holds_blocks,
    native_kernels_missing,
    quantise,
    quantised_vector,
    with_vector_format,
)

gguf = pytest.importorskip("gguf")

native = pytest.mark.skipif(
    native_kernels_missing() is not None, reason=f"no native kernel: {native_kernels_missing()}"
)


def weights(shape, seed=0):
    w = np.random.default_rng(seed).normal(0, 0.05, shape).astype(np.float32)
    w.reshape(-1, 32)[0] = 0  # a block of zeros: d = 0
    w.reshape(-1, 32)[1] = 0.25  # a constant block: max = min
    return w


@pytest.mark.parametrize("format", FORMATS)
def test_quantise_makes_the_bytes_of_llama_cpps_quantisers(format):
    w = weights((3, 40, 96))
    ours = quantise(w, format)
    kind = gguf.GGMLQuantizationType[format]
    raw = gguf.quants.quantize(w.reshape(-1, 96), kind).reshape(-1)
    theirs = from_gguf_blocks(raw, format, w.shape)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))
    expected = gguf.quants.dequantize(raw, kind).reshape(w.shape)
    assert np.array_equal(np.asarray(ours.dequantised()), expected)
    assert ours.shape == w.shape and ours.nbytes == raw.size
    # rows of a table dequantise alone, to the same numbers
    assert np.array_equal(np.asarray(ours[jnp.array([2, 0])]), expected[[2, 0]])
    # at most half a step, plus what rounding d (and m) to float16 adds: 2^-11 of 127 or 15 steps
    step = np.asarray(ours.scales, np.float32).repeat(32, axis=-1)
    error = np.abs(expected - w)
    assert np.all(error <= 0.57 * step + 1e-7)
    assert np.all(error[step == 0] == 0)


def test_q4_1_codes_are_packed_low_halves_first():
    w = np.tile(np.arange(32, dtype=np.float32) / 31, (1, 1))  # codes 0..15 twice, in order
    codes = np.asarray(quantise(w, "Q4_1").codes)[0]
    q = np.rint(np.arange(32) / 31 * 15).astype(np.uint8)
    assert np.array_equal(codes, q[:16] | (q[16:] << 4))
    assert not np.array_equal(codes, q[0::2] | (q[1::2] << 4))  # control: pairs in byte order


def xla_product(matrix, x):
    return np.einsum("...i,ni->n...", np.asarray(matrix.dequantised(), np.float64), x)


@native
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("vectors", [1, 3, 13])
def test_native_product_equals_the_dequantised_matrix_times_x(format, vectors):
    w = weights((2, 200, 576), seed=vectors)
    matrix = quantise(w, format)
    x = np.random.default_rng(1).normal(size=(vectors, 576)).astype(np.float32)
    got = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(matrix, jnp.asarray(x))
    expected = xla_product(matrix, x)
    assert got.shape == (vectors, 2, 200)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(np.asarray(got), expected, rtol=0, atol=1e-5 * scale)
    single = eqx.filter_jit(lambda m, x: m @ x)(matrix, jnp.asarray(x[0]))
    np.testing.assert_allclose(np.asarray(single), expected[0], rtol=0, atol=1e-5 * scale)


# Products of the Q8_0-vector kernel, written to the .npz file named by the first argument;
# run in a subprocess, since a process loads one build of the kernel.
_PRODUCTS = """
import sys
import equinox as eqx, jax, jax.numpy as jnp, numpy as np
from transformer_intro.quantisation import native_kernels_missing, quantise, with_vector_format
assert native_kernels_missing() is None, native_kernels_missing()
rng, out = np.random.default_rng(7), {}
for format in ("Q8_0", "Q4_1"):
    w = quantise(rng.normal(size=(300, 576)).astype(np.float32) * 0.05, format)
    for n in (1, 5, 48):
        x = jnp.asarray(rng.normal(size=(n, 576)).astype(np.float32))
        for vectors in ("Q8_0", None):
            matrix = with_vector_format(w, vectors)
            got = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(matrix, x)
            out[f"{format} {n} {vectors}"] = np.asarray(got)
np.savez(sys.argv[1], **out)
"""


def _products_in_a_fresh_process(path, **environment) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", **environment)
    subprocess.run([sys.executable, "-c", _PRODUCTS, str(path)], env=env, check=True)
    return dict(np.load(path))


@native
def test_products_shared_among_threads_are_the_bits_of_one_thread(tmp_path):
    # The test suite runs the kernel on one thread (TRANSFORMER_INTRO_KERNEL_THREADS, Makefile):
    # here it runs on all of XLA's too, which share each product's rows.
    alone = _products_in_a_fresh_process(tmp_path / "one.npz", TRANSFORMER_INTRO_KERNEL_THREADS="1")
    shared = _products_in_a_fresh_process(tmp_path / "all.npz", TRANSFORMER_INTRO_KERNEL_THREADS="")
    assert alone.keys() == shared.keys()
    for name, expected in alone.items():
        np.testing.assert_array_equal(shared[name], expected, err_msg=name)


@native
@pytest.mark.skipif(
    quantisation._processor_lacks(quantisation._VNNI_NEEDS) != [],
    reason="the processor has no AVX-512 VNNI",
)
def test_the_vnni_build_gives_the_bits_of_the_avx2_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_INTRO_VNNI", "0")
    assert "-mavx512vnni" not in quantisation._compile_command()
    monkeypatch.setenv("TRANSFORMER_INTRO_VNNI", "1")
    assert "-mavx512vnni" in quantisation._compile_command()  # two builds, not one
    products = {
        vnni: _products_in_a_fresh_process(tmp_path / f"{vnni}.npz", TRANSFORMER_INTRO_VNNI=vnni)
        for vnni in ("1", "0")
    }
    assert products["1"].keys() == products["0"].keys()
    for name, avx2 in products["0"].items():
        np.testing.assert_array_equal(products["1"][name], avx2, err_msg=name)
    # control: the comparison sees a difference in the last bits, the float vectors' products
    assert not np.array_equal(products["1"]["Q4_1 48 Q8_0"], products["1"]["Q4_1 48 None"])


@native
def test_native_product_rejects_swapped_scales_and_minima():
    matrix = quantise(weights((64, 256)), "Q4_1")
    swapped = QuantisedMatrix(matrix.codes, matrix.minima, matrix.scales, format="Q4_1")
    x = np.random.default_rng(2).normal(size=(1, 256)).astype(np.float32)
    got = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(swapped, jnp.asarray(x))
    expected = xla_product(matrix, x)
    assert np.abs(np.asarray(got) - expected).max() > 1e-2 * np.abs(expected).max()


@pytest.mark.parametrize("kernel", [pytest.param("native", marks=native), "XLA"])
@pytest.mark.parametrize(("format", "vector_format"), [("Q8_0", None), ("Q4_1", "Q8_0")])
def test_a_layer_of_stacked_matrices_is_that_matrix(format, vector_format, kernel, monkeypatch):
    if kernel == "XLA":
        monkeypatch.setattr(
            "transformer_intro.quantisation.native_kernels_missing", lambda: "asked for XLA"
        )
    stack = with_vector_format(quantise(weights((3, 2, 40, 96)), format), vector_format)
    x = jnp.asarray(np.random.default_rng(5).normal(size=(5, 96)).astype(np.float32))
    products = eqx.filter_jit(lambda w, m, x: jax.vmap(w.of_layer(m))(x))
    for m in range(3):
        alone = jax.tree.map(lambda a, m=m: a[m], stack)  # matrix m, copied out of the stack
        assert stack.of_layer(m).shape == alone.shape == (2, 40, 96)
        expected = np.asarray(eqx.filter_jit(lambda w, x: jax.vmap(w)(x))(alone, x))
        np.testing.assert_array_equal(np.asarray(products(stack, m, x)), expected)
        np.testing.assert_array_equal(stack.of_layer(m).dequantised(), alone.dequantised())
    # the layer is read, not ignored: matrices 0 and 2 differ
    first, last = (np.asarray(products(stack, m, x)) for m in (0, 2))
    assert np.abs(first - last).max() > 0.1 * np.abs(first).max()
    with pytest.raises(ValueError, match="leading axis of stacked matrices"):
        quantise(weights((96,)), format).of_layer(0)


@native
def test_the_kernel_names_a_layer_outside_the_stack():
    stack = quantise(weights((3, 40, 96)), "Q8_0")
    x = jnp.ones(96, jnp.float32)
    with pytest.raises(Exception, match="x, layer, codes and scales disagree"):
        jax.block_until_ready(eqx.filter_jit(lambda w, m, x: w.of_layer(m)(x))(stack, 3, x))


def equations(jaxpr):
    """Every equation of a jaxpr, those of the programs inside it (scans, jits) included."""
    for equation in jaxpr.eqns:
        yield equation
        for value in equation.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from equations(inner)


def codes_multiplied_in_scans(jaxpr) -> list[tuple[int, ...]]:
    """The shapes of the codes that the products inside a scan are given (leading 1s dropped)."""
    scans = [e for e in equations(jaxpr) if e.primitive.name == "scan"]
    calls = [e for s in scans for e in equations(s.params["jaxpr"].jaxpr)]
    shapes = [e.invars[2].aval.shape for e in calls if e.primitive.name == "ffi_call"]
    return [shape[next(i for i, n in enumerate(shape) if n != 1) :] for shape in shapes]


@native
def test_a_scanned_model_gives_its_products_the_whole_stack():
    # Step m of the scan passes the stacked blocks and m: a slice of the stack, which XLA would
    # copy before every product, is never taken.
    model = LanguageModel(TINY.replace(scan_blocks=True), key=jax.random.PRNGKey(0))
    quantised = quantise_model(model, "Q4_1")
    ids = jnp.arange(12) % TINY.vocab_size
    stacks = {
        w.codes.shape for w in jax.tree.leaves(quantised.blocks, is_leaf=lambda x: isinstance(
            x, QuantisedMatrix)) if isinstance(w, QuantisedMatrix)
    }  # fmt: skip
    assert all(shape[0] == TINY.num_blocks for shape in stacks)
    cache = quantised.empty_cache()
    extend = jax.make_jaxpr(lambda m, s: m.extend(s, cache, 0))(quantised, ids)
    given = codes_multiplied_in_scans(extend.jaxpr)
    assert len(given) == 7 and set(given) == stacks, given
    # the control: a scan over the stacked blocks themselves hands each step its block's slice
    arrays, rest = eqx.partition(quantised.blocks, eqx.is_array)

    def step(x, inputs):
        block_arrays, block_cache = inputs
        return eqx.combine(block_arrays, rest).extend(x, block_cache, 0)

    by_slices = jax.make_jaxpr(lambda x: jax.lax.scan(step, x, (arrays, cache)))(
        jnp.zeros((12, TINY.block.dim))
    )
    sliced = codes_multiplied_in_scans(by_slices.jaxpr)
    assert sliced and not set(sliced) & stacks, sliced


def test_a_vector_in_q8_0_blocks_is_rounded_block_by_block():
    x = np.random.default_rng(4).normal(size=96).astype(np.float32)
    x[32:64] = 0  # a block of zeros stays zeros
    got = np.asarray(quantised_vector(jnp.asarray(x)))
    blocks = x.reshape(-1, 32)
    e = np.abs(blocks).max(-1, keepdims=True) / np.float32(127)
    codes = np.rint(blocks * np.where(e == 0, 0, 1 / np.where(e == 0, 1, e)))
    assert np.abs(codes).max() == 127 and np.array_equal(got[32:64], np.zeros(32))
    np.testing.assert_array_equal(got, (e * codes).reshape(-1))
    assert np.all(np.abs(got - x) <= 0.5 * e.repeat(32) * (1 + 1e-6))  # half a step at most
    assert not np.array_equal(got, x)  # control: the rounding shows


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("vectors", [1, 3, 13])
def test_a_product_with_q8_0_vectors_is_that_of_the_dequantised_vectors(format, vectors):
    # 576 = 18 blocks: the kernel's groups of eight blocks and the two left over
    matrix = with_vector_format(quantise(weights((2, 100, 576), seed=vectors), format), "Q8_0")
    assert matrix.vector_format == "Q8_0"
    x = np.random.default_rng(5).normal(size=(vectors, 576)).astype(np.float32)
    got = np.asarray(eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(matrix, jnp.asarray(x)))
    rounded = np.asarray(jax.vmap(quantised_vector)(jnp.asarray(x)), np.float64)
    expected = xla_product(matrix, rounded)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * scale)
    # control: the vectors as they are give other products, by more than the tolerance
    assert np.abs(got - xla_product(matrix, x)).max() > 1e-3 * scale
    plain = with_vector_format(matrix, None)
    assert plain.vector_format is None and plain.codes is matrix.codes
    for tree in (matrix, {"no matrices": jnp.ones(3)}):
        with pytest.raises(ValueError, match="vector_format must be None or 'Q8_0'"):
            with_vector_format(tree, "Q4_1")


def test_xla_product_is_used_when_asked(monkeypatch):
    matrix = quantise(weights((64, 64)), "Q8_0")
    x = jnp.asarray(np.random.default_rng(3).normal(size=64).astype(np.float32))
    monkeypatch.setattr(
        "transformer_intro.quantisation.native_kernels_missing", lambda: "asked for XLA"
    )
    jaxpr = jax.make_jaxpr(lambda m, x: m(x))(matrix, x)
    assert "ffi_call" not in str(jaxpr)
    expected = xla_product(matrix, np.asarray(x)[None])[0]
    np.testing.assert_allclose(np.asarray(matrix(x)), expected, atol=1e-6)
    rounded = np.asarray(quantised_vector(x))[None]
    np.testing.assert_allclose(
        np.asarray(with_vector_format(matrix, "Q8_0")(x)),
        xla_product(matrix, rounded)[0],
        atol=1e-6,
    )


def test_bad_blocks_are_named():
    w = weights((4, 64))
    with pytest.raises(ValueError, match="unknown block format 'Q4_0'"):
        quantise(w, "Q4_0")
    with pytest.raises(ValueError, match="multiple of 32"):
        quantise(np.ones((4, 48), np.float32), "Q8_0")
    q = quantise(w, "Q4_1")
    with pytest.raises(ValueError, match="Q8_0 codes are int8"):
        QuantisedMatrix(q.codes, q.scales, format="Q8_0")
    with pytest.raises(ValueError, match="need scales of shape"):
        QuantisedMatrix(q.codes, q.scales[:, :1], q.minima, format="Q4_1")
    with pytest.raises(ValueError, match="need minima"):
        QuantisedMatrix(q.codes, q.scales, format="Q4_1")
    with pytest.raises(ValueError, match="not Q8_0 blocks"):
        from_gguf_blocks(np.zeros(33, np.uint8), "Q8_0", (1, 32))
    with pytest.raises(ValueError, match=r"expected a vector of shape \(64,\)"):
        q(jnp.ones(32))
    with pytest.raises(ValueError, match="vector_format must be None or 'Q8_0'"):
        QuantisedMatrix(q.codes, q.scales, q.minima, format="Q4_1", vector_format="Q4_1")
    with pytest.raises(ValueError, match="pass quantised=True too"):
        load_smollm2(vector_format="Q8_0")


TINY = llama_config(
    vocab_size=96,
    dim=64,
    num_blocks=2,
    num_heads=2,
    num_kv_heads=1,
    mlp_hidden_dim=128,
    context_length=48,
    rotary_base=10_000.0,
    norm_eps=1e-5,
    tied_embeddings=True,
)


# Each format once and each arrangement of the blocks once: the products are the same kernel's
# calls whichever way the blocks are arranged.
@pytest.mark.parametrize(("format", "scan_blocks"), [("Q8_0", False), ("Q4_1", True)])
def test_a_quantised_model_generates_as_its_dequantised_model(format, scan_blocks):
    model = LanguageModel(TINY.replace(scan_blocks=scan_blocks), key=jax.random.PRNGKey(0))
    # weights large enough that the model's greedy choices are not near-ties
    model = jax.tree.map(lambda a: a * 8 if eqx.is_inexact_array(a) and a.ndim > 1 else a, model)
    quantised = quantise_model(model, format)
    assert holds_blocks(quantised) and not holds_blocks(model)
    floats = dequantise_model(quantised)
    assert jax.tree.structure(floats) == jax.tree.structure(model)
    ids = jnp.arange(12) % TINY.vocab_size
    logits, _ = eqx.filter_jit(lambda m, s: m.extend(s, m.empty_cache(), 0))(quantised, ids)
    expected = np.asarray(floats(ids))
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-4 * np.abs(expected).max())
    assert np.abs(expected - np.asarray(model(ids))).max() > 1e-4  # the rounding shows
    prompt = np.array([1, 5, 9, 2])
    assert np.array_equal(generate_ids(quantised, prompt, 20), generate_ids(floats, prompt, 20))
    with pytest.raises(ValueError, match="quantised already"):
        quantise_model(quantised, format)


def test_attention_in_blocks_refuses_the_float_paths_and_names_the_fix():
    model = quantise_model(LanguageModel(TINY, key=jax.random.PRNGKey(0)), "Q8_0")
    attention = model.blocks[0].attention
    assert isinstance(attention, QuantisedSelfAttention)
    x = jnp.zeros((3, TINY.block.dim))
    for call in (lambda: attention(x), lambda: attention.batched(x[None])):
        with pytest.raises(ValueError, match=r"only generates \(extend\).*dequantise_model"):
            call()
    # control: the float model it computes is the float layer again, and runs
    floats = dequantise_model(model).blocks[0].attention
    assert type(floats) is MultiHeadSelfAttention and floats(x).shape == x.shape


def test_the_gguf_reader_reads_what_gguf_writes(tmp_path):
    from transformer_intro.pretrained.gguf import GGUFFile, dequantise

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    values = gguf.GGUFValueType
    writer.add_uint32("a.u32", 7)
    writer.add_int32("a.i32", -3)
    writer.add_uint64("a.u64", 2**40)
    writer.add_float32("a.f32", 0.1)
    writer.add_float64("a.f64", 0.1)
    writer.add_bool("a.bool", True)
    writer.add_string("a.text", "ça va? 🙂")
    writer.add_array("a.words", ["x", "", "zwölf"])
    writer.add_key_value("a.ints", [1, -2, 3], values.ARRAY, sub_type=values.INT32)
    w = weights((8, 64))
    writer.add_tensor("floats", w)
    for format in FORMATS:
        kind = gguf.GGMLQuantizationType[format]
        raw = gguf.quants.quantize(w, kind)
        writer.add_tensor(format, raw, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    ours, theirs = GGUFFile(path), gguf.GGUFReader(path)
    fields = {n: f.contents() for n, f in theirs.fields.items() if not n.startswith("GGUF.")}
    assert ours.metadata == fields
    assert ours.metadata["a.f32"] == np.float32(0.1) and ours.metadata["a.f64"] == 0.1
    assert ours.metadata["a.words"] == ["x", "", "zwölf"]
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, reference in zip(ours.tensors, theirs.tensors, strict=True):
        assert tuple(mine.shape) == tuple(int(n) for n in reference.shape)
        assert mine.tensor_type == reference.tensor_type
        assert mine.data_offset == reference.data_offset and mine.n_bytes == reference.n_bytes
        assert np.array_equal(dequantise(mine), dequantise(reference))
    assert np.array_equal(dequantise(ours.tensors[0]), w)


def test_the_gguf_reader_names_a_file_it_cannot_read(tmp_path):
    from transformer_intro.pretrained.gguf import GGUFFile

    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(ValueError, match="not a GGUF file"):
        GGUFFile(tmp_path / "not.gguf")
    (tmp_path / "old.gguf").write_bytes(b"GGUF" + (1).to_bytes(4, "little") + bytes(60))
    with pytest.raises(ValueError, match="GGUF version 1"):
        GGUFFile(tmp_path / "old.gguf")


def write_tiny_llama(path, up_rows=128, down_inputs=128, blocks=1, last_up="Q4_1"):
    """A Llama-architecture GGUF file, its matrices in Q4_1 (the last block's up projection in
    ``last_up``) and its table in Q8_0."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(64)])
    for key, value in [("embedding_length", 64), ("block_count", blocks), ("context_length", 32),
                       ("attention.head_count", 2), ("attention.head_count_kv", 1),
                       ("feed_forward_length", 128)]:  # fmt: skip
        writer.add_uint32(f"llama.{key}", value)
    writer.add_float32("llama.rope.freq_base", 10_000.0)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    rng = np.random.default_rng(4)

    def add(name, shape, kind="Q4_1"):
        w = rng.normal(0, 0.1, shape).astype(np.float32)
        if kind == "F32":
            writer.add_tensor(name, w)
        else:
            quant = gguf.GGMLQuantizationType[kind]
            writer.add_tensor(name, gguf.quants.quantize(w, quant), raw_dtype=quant)

    add("token_embd.weight", (64, 64), "Q8_0")
    add("output_norm.weight", (64,), "F32")
    matrices = [("attn_q", (64, 64)), ("attn_k", (32, 64)), ("attn_v", (32, 64)),
                ("attn_output", (64, 64)), ("ffn_gate", (128, 64)), ("ffn_up", (up_rows, 64)),
                ("ffn_down", (64, down_inputs))]  # fmt: skip
    for m in range(blocks):
        for part, shape in [("attn_norm", (64,)), ("ffn_norm", (64,))]:
            add(f"blk.{m}.{part}.weight", shape, "F32")
        for part, shape in matrices:
            last = part == "ffn_up" and m == blocks - 1
            add(f"blk.{m}.{part}.weight", shape, last_up if last else "Q4_1")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_file_loads_in_blocks_as_the_float_loader_reads_it(tmp_path):
    from transformer_intro.pretrained.gguf import (
        config_from_gguf,
        hf_tensors_from_gguf,
        quantised_model_from_gguf,
        read_gguf,
    )
    from transformer_intro.pretrained.llama import model_from_hf_tensors

    write_tiny_llama(tmp_path / "tiny.gguf")
    tensors, metadata = read_gguf(tmp_path / "tiny.gguf")
    config = config_from_gguf(metadata)
    floats = model_from_hf_tensors(hf_tensors_from_gguf(tensors, config), config)
    blocks = quantised_model_from_gguf(tmp_path / "tiny.gguf")
    same = jax.tree.map(
        lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), dequantise_model(blocks), floats
    )
    assert all(jax.tree.leaves(same))
    # a matrix of another shape than the model's is named, with both shapes
    write_tiny_llama(tmp_path / "wrong.gguf", up_rows=96)
    with pytest.raises(ValueError, match=r"blk\.0\.ffn_up\.weight is \(96, 64\) in the file"):
        quantised_model_from_gguf(tmp_path / "wrong.gguf")
    write_tiny_llama(tmp_path / "narrow.gguf", down_inputs=96)
    with pytest.raises(ValueError, match=r"ffn_down\.weight \(64, 96\), the model's \(64, 128\)"):
        quantised_model_from_gguf(tmp_path / "narrow.gguf")


def test_scanned_blocks_load_stacked_and_mixed_formats_are_named(tmp_path):
    from transformer_intro.pretrained.gguf import quantised_model_from_gguf

    write_tiny_llama(tmp_path / "two.gguf", blocks=2)
    loop = quantised_model_from_gguf(tmp_path / "two.gguf")
    scanned = quantised_model_from_gguf(tmp_path / "two.gguf", scan_blocks=True)
    assert scanned.config.scan_blocks and scanned.blocks.attention.query_projections.shape[0] == 2
    same = jax.tree.map(
        lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)),
        dequantise_model(scanned),
        dequantise_model(loop).stacked(),
    )
    assert all(jax.tree.leaves(same))
    ids = jnp.arange(10) % 64
    logits = [m.extend(ids, m.empty_cache(), 0)[0] for m in (scanned, loop)]
    np.testing.assert_allclose(*map(np.asarray, logits), rtol=0, atol=1e-5)
    # one kind of matrix in two formats cannot be one stack; the loop of blocks takes it
    write_tiny_llama(tmp_path / "mixed.gguf", blocks=2, last_up="Q8_0")
    with pytest.raises(ValueError, match=r"blk\.\*\.ffn_up\.weight tensors are in several formats"):
        quantised_model_from_gguf(tmp_path / "mixed.gguf", scan_blocks=True)
    assert (
        quantised_model_from_gguf(tmp_path / "mixed.gguf").blocks[1].mlp.up.weight.format == "Q8_0"
    )
