"""Chapter 9's model and its ablations, computed again by TransformerLens (an independent library).

TransformerLens 4.3.0 no longer has ``HookedTransformer`` (removed in 4.0); its replacement,
``TransformerBridge``, wraps a model and gives it the same hooks. Its TL-native model
(``TransformerBridge.boot_native``) is chapter 9's architecture, part for part: pre-norm blocks
with LayerNorm (eps 1e-5), the GELU in its tanh form ("gelu_new"), rotary positions on whole
heads with adjacent pairs (2i, 2i+1) rotated together (the book's "interleaved" layout) and the
same frequencies, scores divided by sqrt(K), an MLP with biases, a final LayerNorm and an
untied read-out. Only two things differ, both mapped exactly:

* TransformerLens's attention has four biases; chapter 9's has none, so they are zeros.
* Its read-out has no bias ``b_U``; chapter 9's has one. It is folded into the final
  LayerNorm's shift: ``W_U (β + c) = W_U β + b_U`` with ``W_U c = b_U``, which a c solves
  exactly because ``W_U`` (84 x 128) has full row rank (the test checks the residual).

Then the logits must agree, and so must the loss with each of the 16 heads zero- or
mean-ablated through TransformerLens's own hook (``blocks.m.attn.hook_z``, the heads' outputs
before ``W_O``) and through :func:`transformer_intro.interpretability.run_with_heads`. The
control: a head ablated in one library and another head in the other are told apart.
"""

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.interpretability import ablation_losses, mean_head_outputs, run_with_heads
from transformer_intro.models import LanguageModel
from transformer_intro.tokenisers import Vocabulary
from transformer_intro.training import load_checkpoint

torch = pytest.importorskip("torch")
pytest.importorskip("transformer_lens")
from transformer_lens import TransformerBridgeConfig  # noqa: E402
from transformer_lens.model_bridge.sources._bridge_builder import (  # noqa: E402
    build_bridge_from_module,
)
from transformer_lens.model_bridge.sources.native.model import NativeModel  # noqa: E402

CHECKPOINT = Path(__file__).resolve().parents[1] / "book" / "checkpoints" / "shakespeare_lm.eqx"
NUM_WINDOWS = 16


@functools.cache
def chapter_9():
    model, info = load_checkpoint(CHECKPOINT)
    vocabulary = Vocabulary(info.extra["symbols"])
    text = load_shakespeare("validation")
    ids = np.asarray(vocabulary.encode(text[:200_000]), np.int32)
    n = model.config.window + 1
    starts = np.linspace(0, len(ids) - n, NUM_WINDOWS).astype(int)
    windows = jnp.asarray(np.stack([ids[s : s + n] for s in starts]))
    return model, windows


def tl_config(model):
    c, b = model.config, model.config.block
    return TransformerBridgeConfig(
        d_model=b.dim, d_head=b.keys_dim, n_heads=b.num_heads, n_layers=c.num_blocks,
        n_ctx=c.window, d_vocab=c.vocab_size, d_mlp=b.mlp_hidden_dim, act_fn="gelu_new",
        normalization_type="LN", positional_embedding_type="rotary", rotary_dim=b.keys_dim,
        rotary_base=b.rotary_base, eps=b.norm_eps, init_weights=False,
    )  # fmt: skip


def tensor(x):
    return torch.tensor(np.asarray(x, np.float32))


@functools.cache
def bridge():
    """Chapter 9's weights in TransformerLens's native model, wrapped in a TransformerBridge."""
    model, _ = chapter_9()
    c = model.config.block
    assert c.norm == "layer" and c.activation == "gelu_tanh" and c.rotary
    assert c.rotary_layout == "interleaved" and not c.attention_bias
    assert not model.config.tied_embeddings and not model.config.learned_positions
    assert c.mlp == "mlp" and c.num_kv_heads is None and not c.qk_norm
    cfg = tl_config(model)
    native = NativeModel(cfg)
    with torch.no_grad():
        native.tok_embed.weight.copy_(tensor(model.tokeniser.table))
        for block, layer in zip(model.blocks, native.layers):
            a = block.attention
            layer.ln1.weight.copy_(tensor(block.attention_norm.weight))
            layer.ln1.bias.copy_(tensor(block.attention_norm.bias))
            for linear, weights in ((layer.attn.q, a.query_projections),
                                    (layer.attn.k, a.key_projections),
                                    (layer.attn.v, a.value_projections)):  # fmt: skip
                linear.weight.copy_(tensor(weights.reshape(-1, c.dim)))  # row h K + k
                linear.bias.zero_()
            # O_h is (D, Dv); W_O = [O_1 ... O_H], column h Dv + v
            w_o = jnp.transpose(a.output_projections, (1, 0, 2)).reshape(c.dim, -1)
            layer.attn.o.weight.copy_(tensor(w_o))
            layer.attn.o.bias.zero_()
            layer.ln2.weight.copy_(tensor(block.mlp_norm.weight))
            layer.ln2.bias.copy_(tensor(block.mlp_norm.bias))
            first, second = block.mlp.layers
            layer.mlp.fc_in.weight.copy_(tensor(first.weight))
            layer.mlp.fc_in.bias.copy_(tensor(first.bias))
            layer.mlp.fc_out.weight.copy_(tensor(second.weight))
            layer.mlp.fc_out.bias.copy_(tensor(second.bias))
        w_u = np.asarray(model.unembedding.weight, np.float64)
        b_u = np.asarray(model.unembedding.bias, np.float64)
        shift, *_ = np.linalg.lstsq(w_u, b_u, rcond=None)
        assert np.abs(w_u @ shift - b_u).max() < 1e-9  # exact: W_U has full row rank
        native.ln_out.weight.copy_(tensor(model.final_norm.weight))
        native.ln_out.bias.copy_(tensor(np.asarray(model.final_norm.bias, np.float64) + shift))
        native.head.weight.copy_(tensor(model.unembedding.weight))
    return build_bridge_from_module(native, architecture="TransformerLensNative", tl_config=cfg)


def tl_losses(windows, fwd_hooks=()):
    """Each window's mean nats per symbol through the bridge, with the hooks given."""
    inputs = torch.tensor(np.asarray(windows[:, :-1]), dtype=torch.long)
    targets = torch.tensor(np.asarray(windows[:, 1:]), dtype=torch.long)
    with torch.no_grad():
        logits = bridge().run_with_hooks(inputs, fwd_hooks=list(fwd_hooks))
    nats = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return nats.mean(-1).numpy(), logits.numpy()


def ablate(head, replacement=None):
    """A hook on ``hook_z`` (batch, position, head, Dv) that replaces one head's values."""

    def hook(z, hook):
        z = z.clone()
        z[:, :, head] = 0.0 if replacement is None else replacement[:, :, head]
        return z

    return hook


def test_the_same_logits():
    model, windows = chapter_9()
    _, logits = tl_losses(windows)
    with jax.default_matmul_precision("highest"):
        ours = jax.vmap(model)(windows[:, :-1])
    assert np.abs(logits - np.asarray(ours)).max() < 1e-3
    # control: the same weights with the other rotary layout, pairs (i, i + K/2), are another
    # model, which TransformerLens's adjacent pairs do not compute
    half = LanguageModel(
        model.config.replace(block=model.config.block.replace(rotary_layout="half")),
        key=jax.random.PRNGKey(0),
    )
    half = jax.tree.unflatten(jax.tree.structure(half), jax.tree.leaves(model))
    with jax.default_matmul_precision("highest"):
        other = jax.vmap(half)(windows[:, :-1])
    assert np.abs(logits - np.asarray(other)).max() > 0.1


def test_the_same_zero_ablated_losses():
    model, windows = chapter_9()
    with jax.default_matmul_precision("highest"):
        intact, ours = ablation_losses(model, windows)
    theirs_intact, _ = tl_losses(windows)
    assert np.abs(intact - theirs_intact).max() < 1e-4
    m_blocks, h_heads = ours.shape[:2]
    theirs = np.zeros_like(ours)
    for m in range(m_blocks):
        for h in range(h_heads):
            theirs[m, h], _ = tl_losses(windows, [(f"blocks.{m}.attn.hook_z", ablate(h))])
    assert np.abs(ours - theirs).max() < 1e-4
    # control: a wrong head ablated in TransformerLens is told apart from ours
    flat_ours, flat_theirs = ours.reshape(-1, len(windows)), theirs.reshape(-1, len(windows))
    differences = np.abs(flat_ours[:, None] - flat_theirs[None]).max(-1)  # (16, 16)
    off_diagonal = differences[~np.eye(len(differences), dtype=bool)]
    assert off_diagonal.min() > 10 * np.diag(differences).max()


def test_the_same_mean_ablated_losses():
    model, windows = chapter_9()
    with jax.default_matmul_precision("highest"):
        mean = mean_head_outputs(model, windows[:, :-1])
        intact, ours = ablation_losses(model, windows, mean)
    # TransformerLens's mean of each head's values, position by position, over the same windows
    z_means = {}

    def record(m):
        def hook(z, hook):
            z_means[m] = z.mean(0, keepdim=True)
            return z

        return hook

    tl_losses(windows, [(f"blocks.{m}.attn.hook_z", record(m)) for m in range(4)])
    for m in range(4):
        for h in (0, 3):
            theirs, _ = tl_losses(windows, [(f"blocks.{m}.attn.hook_z", ablate(h, z_means[m]))])
            assert np.abs(ours[m, h] - theirs).max() < 1e-4
    # control: zero ablation of the same head gives other losses
    zero, _ = tl_losses(windows, [("blocks.0.attn.hook_z", ablate(0))])
    assert np.abs(ours[0, 0] - zero).max() > 1e-3


def test_the_hook_is_what_run_with_heads_replaces():
    # Patching head (1, 2) from one window into another, in both libraries.
    model, windows = chapter_9()
    clean, corrupted = windows[0, :-1], windows[1, :-1]
    with jax.default_matmul_precision("highest"):
        heads = run_with_heads(model, clean).heads
        keep = jnp.ones((4, 4)).at[1, 2].set(0.0)
        ours = run_with_heads(model, corrupted, keep, heads).logits
    saved = {}

    def save(z, hook):
        saved["z"] = z.clone()
        return z

    tl_losses(windows[:1], [("blocks.1.attn.hook_z", save)])
    _, theirs = tl_losses(windows[1:2], [("blocks.1.attn.hook_z", ablate(2, saved["z"]))])
    assert np.abs(theirs[0] - np.asarray(ours)).max() < 1e-3
    _, unpatched = tl_losses(windows[1:2])
    assert np.abs(unpatched[0] - np.asarray(ours)).max() > 1e-3
