"""MLP, LayerNorm, the transformer block, tokenisers and position embeddings."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro import (
    MLP,
    ContinuousTokeniser,
    DiscreteTokeniser,
    LayerNorm,
    PatchTokeniser,
    PositionEmbedding,
    TransformerBlock,
    patchify,
    sinusoidal_embeddings,
)
from transformer_intro.block import BlockConfig

N, D = 5, 8


def assert_close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=tol)


@pytest.fixture
def x():
    return jax.random.normal(jax.random.PRNGKey(0), (N, D)) * 3 + 1


def permutation():
    return jnp.array([3, 0, 4, 1, 2])


# --- MLP ----------------------------------------------------------------------------------------


def test_mlp_shapes_depth_and_activation():
    mlp = MLP(D, 16, num_layers=2, out_dim=3, activation=jax.nn.relu, key=jax.random.PRNGKey(0))
    assert [l.weight.shape for l in mlp.layers] == [(16, D), (16, 16), (3, 16)]
    token = jnp.arange(D, dtype=jnp.float32)
    hidden = token
    for layer in mlp.layers[:-1]:
        hidden = jnp.maximum(layer.weight @ hidden + layer.bias, 0)
    assert_close(mlp(token), mlp.layers[-1].weight @ hidden + mlp.layers[-1].bias)


def test_mlp_is_token_wise_and_permutation_equivariant(x):
    mlp = MLP(D, 16, key=jax.random.PRNGKey(1))
    y = jax.vmap(mlp)(x)
    assert_close(y[2], mlp(x[2]))  # each token on its own
    assert_close(jax.vmap(mlp)(x[permutation()]), y[permutation()])
    assert_close(mlp.batched(x), y)


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_mlp_rejects_a_sequence():
    with pytest.raises(ValueError, match="one token"):
        MLP(D, 16, key=jax.random.PRNGKey(1))(jnp.ones((N, D)))


# --- LayerNorm ------------------------------------------------------------------------------------


def test_layernorm_normalises_each_token(x):
    y = LayerNorm(D)(x)
    assert_close(y.mean(-1), jnp.zeros(N), 1e-5)
    assert_close(y.std(-1), jnp.ones(N), 1e-3)


def test_layernorm_equals_equinox_with_same_scale_and_shift(x):
    ours = LayerNorm(D)
    theirs = eqx.nn.LayerNorm(D)
    gamma = jax.random.normal(jax.random.PRNGKey(2), (D,))
    beta = jax.random.normal(jax.random.PRNGKey(3), (D,))
    ours = eqx.tree_at(lambda l: (l.weight, l.bias), ours, (gamma, beta))
    theirs = eqx.tree_at(lambda l: (l.weight, l.bias), theirs, (gamma, beta))
    assert_close(ours(x), jax.vmap(theirs)(x))


def test_layernorm_is_permutation_equivariant_and_invariant_to_token_scale(x):
    norm = LayerNorm(D)
    assert_close(norm(x[permutation()]), norm(x)[permutation()])
    assert_close(norm(x * 10 + 4), norm(x), 1e-3)


# --- the transformer block ------------------------------------------------------------------------


@pytest.mark.parametrize("residual", ["input", "normalised"])
def test_block_is_permutation_equivariant(x, residual):
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, residual=residual),
        key=jax.random.PRNGKey(4),
    )
    assert_close(block(x[permutation()]), block(x)[permutation()], 1e-4)


def zero_branches(block):
    """The same block with the last layer of each branch zeroed: both branches output zero."""
    block = eqx.tree_at(
        lambda b: b.attention.value_projections,
        block,
        jnp.zeros_like(block.attention.value_projections),
    )
    last = block.mlp.layers[-1]
    return eqx.tree_at(
        lambda b: (b.mlp.layers[-1].weight, b.mlp.layers[-1].bias),
        block,
        (jnp.zeros_like(last.weight), jnp.zeros_like(last.bias)),
    )


def test_residual_block_with_zero_branches_is_identity(x):
    block = zero_branches(
        TransformerBlock(
            BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16), key=jax.random.PRNGKey(5)
        )
    )
    assert_close(block(x), x)


def test_text_form_with_zero_branches_is_layernorm_not_identity(x):
    block = zero_branches(
        TransformerBlock(
            BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, residual="normalised"),
            key=jax.random.PRNGKey(5),
        )
    )
    assert_close(block(x), LayerNorm(D)(x))
    assert not np.allclose(block(x), x, atol=1e-2)


def test_block_matches_its_four_equations(x):
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16), key=jax.random.PRNGKey(6)
    )
    x_bar = LayerNorm(D)(x)
    y = x + block.attention(x_bar)
    expected = y + jax.vmap(block.mlp)(LayerNorm(D)(y))
    assert_close(block(x), expected)


@pytest.mark.parametrize("residual", ["input", "normalised"])
def test_block_batched_equals_vmapped(residual):
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, value_dim=4, residual=residual),
        key=jax.random.PRNGKey(7),
    )
    xs = jax.random.normal(jax.random.PRNGKey(8), (3, N, D))
    assert_close(block.batched(xs), jax.vmap(block)(xs), 1e-4)


@pytest.mark.parametrize("residual", ["input", "normalised"])
def test_block_batched_num_outputs_is_the_first_tokens_of_the_full_block(residual):
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, value_dim=4, residual=residual),
        key=jax.random.PRNGKey(7),
    )
    xs = jax.random.normal(jax.random.PRNGKey(8), (3, N, D))
    assert_close(block.batched(xs, num_outputs=1), jax.vmap(block)(xs)[:, :1], 1e-4)


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_block_rejects_unknown_residual():
    with pytest.raises(ValueError, match="residual"):
        TransformerBlock(
            BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, residual="output"),
            key=jax.random.PRNGKey(0),
        )


# --- tokenisers -----------------------------------------------------------------------------------


def test_discrete_tokeniser_looks_up_rows():
    tok = DiscreteTokeniser(10, D, key=jax.random.PRNGKey(9))
    ids = jnp.array([3, 3, 7])
    out = tok(ids)
    assert_close(out[0], tok.table[3])
    assert_close(out[0], out[1])
    with pytest.raises(Exception, match="out of range"):
        tok(jnp.array([10]))


def test_continuous_tokeniser_is_shared_linear_map():
    tok = ContinuousTokeniser(3, D, key=jax.random.PRNGKey(10))
    s = jax.random.normal(jax.random.PRNGKey(11), (N, 3))
    layer = tok.projection
    assert_close(tok(s), s @ layer.weight.T + layer.bias)
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        tok(jnp.ones((N, 4)))


@pytest.mark.parametrize("patch_size,channels", [(4, 1), (7, 3), (2, 2)])
def test_patch_convolution_equals_patch_then_project(patch_size, channels):
    tok = PatchTokeniser(patch_size, channels, D, key=jax.random.PRNGKey(12))
    image = jax.random.normal(jax.random.PRNGKey(13), (channels, 28, 28))
    weight, bias = tok.linear_map()
    expected = patchify(image, patch_size) @ weight.T + bias
    assert_close(tok(image), expected, 1e-4)


def test_patchify_puts_patches_in_reading_order():
    image = jnp.arange(16.0).reshape(1, 4, 4)
    patches = patchify(image, 2)
    assert_close(patches[0], jnp.array([0.0, 1, 4, 5]))
    assert_close(patches[1], jnp.array([2.0, 3, 6, 7]))
    assert_close(patches[2], jnp.array([8.0, 9, 12, 13]))


def test_patch_size_that_does_not_divide_image_raises():
    with pytest.raises(ValueError, match="patch size 5 does not divide the 28x28 image"):
        PatchTokeniser(5, 1, D, key=jax.random.PRNGKey(0))(jnp.ones((1, 28, 28)))
    with pytest.raises(ValueError, match="does not divide"):
        patchify(jnp.ones((1, 28, 28)), 3)


# --- positions ------------------------------------------------------------------------------------


def test_sinusoidal_embeddings_formula():
    table = sinusoidal_embeddings(10, 6)
    n, i = 7, 1
    omega = 10_000 ** (-2 * i / 6)
    assert_close(table[n, 2 * i], np.sin(n * omega))
    assert_close(table[n, 2 * i + 1], np.cos(n * omega))
    # A shift by k positions is the same rotation of each (sin, cos) pair for every n.
    assert_close(jnp.linalg.norm(table.reshape(10, 3, 2), axis=-1), jnp.ones((10, 3)))


def test_add_and_concat_position_embeddings(x):
    add = PositionEmbedding(N, D, key=jax.random.PRNGKey(14))
    assert_close(add(x), x + add.embeddings)
    cat = PositionEmbedding(N, 4, kind="sinusoidal", combine="concat")
    out = cat(x)
    assert out.shape == (N, D + 4)
    assert_close(out[:, D:], sinusoidal_embeddings(N, 4))
    with pytest.raises(ValueError, match="width"):
        PositionEmbedding(N, 4, kind="sinusoidal")(x)


def test_sinusoidal_table_receives_no_gradient(x):
    pos = PositionEmbedding(N, D, kind="sinusoidal")
    grads = eqx.filter_grad(lambda p: (p(x) ** 2).sum())(pos)
    assert_close(grads.embeddings, jnp.zeros((N, D)))


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_position_embeddings_break_permutation_equivariance(x, kind):
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16), key=jax.random.PRNGKey(15)
    )
    pos = PositionEmbedding(N, D, kind=kind, init_scale=1.0, key=jax.random.PRNGKey(16))
    model = lambda s: block(pos(s))
    perm = permutation()
    assert_close(block(x[perm]), block(x)[perm], 1e-4)
    assert not np.allclose(model(x[perm]), model(x)[perm], atol=1e-2)


def test_vocabulary_round_trips_and_orders_specials_first():
    from transformer_intro import Vocabulary

    vocabulary = Vocabulary.from_text("to be, or not to be", specials=("<pad>", "<s>"))
    assert vocabulary.symbols[:2] == ("<pad>", "<s>") and len(vocabulary) == 2 + len(
        set("to be, or not to be")
    )
    ids = vocabulary.encode("not to be")
    assert ids.dtype == np.int32 and vocabulary.decode(ids) == "not to be"
    assert vocabulary.decode([1, *ids.tolist()], skip_specials=True) == "not to be"
    # The same text gives the same ids whatever order its characters arrive in.
    assert Vocabulary.from_text("eb ot").symbols == Vocabulary.from_text("to be").symbols


def test_vocabulary_errors_name_the_problem():
    from transformer_intro import Vocabulary

    vocabulary = Vocabulary.from_text("abc")
    with pytest.raises(
        ValueError, match=r"not in the vocabulary: 'x', 'z' \(first at position 1\)"
    ):
        vocabulary.encode("azbx")
    with pytest.raises(ValueError, match="empty text"):
        vocabulary.encode("")
    with pytest.raises(ValueError, match="at least one symbol"):
        Vocabulary.from_text("")
    with pytest.raises(ValueError, match="out of range"):
        vocabulary.decode([0, 3])
