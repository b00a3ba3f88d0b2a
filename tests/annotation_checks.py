"""The package's shape annotations, checked on the models' main calls.

The annotations (jaxtyping's ``Float[Array, "B N D"]`` and the like) document every shape.
tests/conftest.py imports the package under jaxtyping's import hook with beartype, so in the unit
session every annotated function checks its arguments and its result. :func:`main` traces each
model's main methods on tiny configurations with ``jax.eval_shape`` (the checks run while tracing,
so little needs compiling) and returns the calls that passed, the errors of those that did not,
and a control (a wrong shape, which only a live check refuses). tests/test_annotations.py asserts
on it.
"""

from __future__ import annotations

import traceback

import jax
import jax.numpy as jnp
import jaxtyping
from factories import tiny_encoder_decoder, tiny_lm, tiny_vit, vit_block

from transformer_intro import EncoderDecoder, LanguageModel, VisionTransformer
from transformer_intro.adapters import LoRALanguageModel
from transformer_intro.attention import causal_mask
from transformer_intro.block import TransformerBlock
from transformer_intro.models.generation import cached_logits, generate, generate_ids
from transformer_intro.pretrained.smollm2 import smollm2_config

KEY = jax.random.PRNGKey(0)
TINY_VIT = tiny_vit(num_classes=4)
TINY_LM = tiny_lm(vocab_size=11, num_blocks=2)
# The Llama family's options (RMSNorm, a gated MLP, grouped key-value heads, rotary halves),
# as the pretrained model's configuration builds them.
TINY_LLAMA = smollm2_config(
    vocab_size=11, dim=16, num_blocks=2, num_heads=4, num_kv_heads=2, mlp_hidden_dim=32,
    context_length=8,
)  # fmt: skip


def calls():
    """(name, thunk) for each checked call; each thunk returns an array or a tuple of them."""
    vit = VisionTransformer(TINY_VIT, key=KEY)
    images = jnp.zeros((3, 1, 8, 8))
    yield "VisionTransformer.__call__", lambda: vit(images[0])
    yield "VisionTransformer.batched", lambda: vit.batched(images)

    block = TransformerBlock(vit_block(), key=KEY)
    x = jnp.ones((3, 5, 16))
    yield "TransformerBlock.__call__", lambda: block(x[0], causal_mask(5))
    yield "TransformerBlock.batched", lambda: block.batched(x, causal_mask(5))
    yield "TransformerBlock.batched, two outputs", lambda: block.batched(x, num_outputs=2)

    symbols = jnp.array([1, 4, 2, 9, 0], jnp.int32)
    for name, config in (("LanguageModel", TINY_LM), ("LanguageModel (Llama options)", TINY_LLAMA)):
        lm = LanguageModel(config, key=KEY)
        yield f"{name}.__call__", lambda lm=lm: lm(symbols)
        yield f"{name}.batched", lambda lm=lm: lm.batched(jnp.stack([symbols, symbols]))
        yield f"{name}.extend", lambda lm=lm: lm.extend(symbols, lm.empty_cache(), 0)
        yield f"{name}, cached_logits", lambda lm=lm: cached_logits(lm, symbols, 2)
        yield f"{name}, generate", lambda lm=lm: generate(lm, symbols[:3], 6, KEY, top_k=3)

    # The pretrained model's decoder compiles its loop itself and returns host arrays: run, not
    # traced (its prefill and decode are checked while it compiles them).
    llama = LanguageModel(TINY_LLAMA, key=KEY)
    yield "generate_ids (run)", lambda: jnp.asarray(generate_ids(llama, [1, 4, 2], 3))

    lora = LoRALanguageModel(LanguageModel(TINY_LM, key=KEY), 2, key=KEY)
    yield "LoRALanguageModel.__call__", lambda: lora(symbols)

    config = tiny_encoder_decoder(
        13, 9, 7, 6, block=vit_block(mlp_hidden_dim=24), encoder_layers=1, decoder_layers=1
    )
    model = EncoderDecoder(config, key=KEY)
    sources = jnp.array([[3, 4, 5, 0, 0, 0, 0], [6, 7, 8, 9, 10, 0, 0]], jnp.int32)
    targets = jnp.array([[1, 2, 3, 4], [1, 5, 6, 7]], jnp.int32)
    yield "EncoderDecoder.__call__", lambda: model(sources[0], targets[0])
    yield "EncoderDecoder.batched", lambda: model.batched(sources, targets)
    yield "EncoderDecoder.greedy_decode", lambda: model.greedy_decode(sources, 1, 5)


def main() -> dict:
    passed, failed = [], {}
    for name, thunk in calls():
        try:
            thunk() if name.endswith("(run)") else jax.eval_shape(thunk)
            passed.append(name)
        except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
            failed[name] = "".join(traceback.format_exception_only(error))[-2000:]
    # The control: a wrong shape is caught by the hook itself, so the checks above were live.
    vit = VisionTransformer(TINY_VIT, key=KEY)
    try:
        vit.batched(jnp.zeros((1, 8, 8)))
        control = "no error"
    except jaxtyping.TypeCheckError as error:
        control = type(error).__name__
    except Exception as error:  # noqa: BLE001
        control = f"{type(error).__name__}: {error}"
    return {"passed": passed, "failed": failed, "control": control}
