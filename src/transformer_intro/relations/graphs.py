"""Attention as message passing on a graph.

Graph attention: Veličković et al., 2018; Brody, Alon & Yahav, 2022.

Self-attention sends a message v_n' from every token n' to every token n and lets n average them
with weights A[n', n]: message passing on the complete graph. A mask with ``mask[n', n] = True``
exactly where the graph has an edge n' → n restricts it to that graph; the softmax then runs over
each node's incoming edges, which an edge list computes with segment operations.

A graph attention network (GAT) is the same computation with another score function,

    e[n', n] = LeakyReLU(a_outᵀ W x_n + a_inᵀ W x_n'),

and because LeakyReLU is increasing, every node n ranks its neighbours n' by a_inᵀ W x_n' alone:
the ranking is the same for every query ("static" attention). GATv2 applies the nonlinearity
before the attention vector, e[n', n] = aᵀ LeakyReLU(W_out x_n + W_in x_n'), and dot-product
attention k_n'ᵀ q_n can rank differently for every query ("dynamic").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

__all__ = [
    "adjacency_mask",
    "edge_softmax_attention",
    "gat_scores",
    "gatv2_scores",
    "is_static",
    "rankings",
]


def adjacency_mask(
    senders: Int[Array, " E"], receivers: Int[Array, " E"], num_nodes: int
) -> Bool[Array, "N N"]:
    """``mask[n', n] = True`` for every edge n' → n: input n' may send to output n."""
    return jnp.zeros((num_nodes, num_nodes), dtype=bool).at[senders, receivers].set(True)


def edge_softmax_attention(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    senders: Int[Array, " E"],
    receivers: Int[Array, " E"],
    *,
    edge_scores: Float[Array, " E"] | None = None,
) -> Float[Array, "N Dv"]:
    """Attention on an edge list: a softmax over each receiver's incoming edges.

    ``edge_scores`` defaults to ``k_senderᵀ q_receiver``; pass other scores (such as a GAT's) to
    use another score function. Every node needs at least one incoming edge (a self-loop will do).
    """
    num_nodes = keys.shape[0]
    if edge_scores is None:
        edge_scores = jnp.sum(keys[senders] * queries[receivers], axis=-1)
    # subtract each receiver's largest score, as the dense softmax does per column
    largest = jax.ops.segment_max(edge_scores, receivers, num_segments=num_nodes)
    unnormalised = jnp.exp(edge_scores - largest[receivers])
    normaliser = jax.ops.segment_sum(unnormalised, receivers, num_segments=num_nodes)
    weights = unnormalised / normaliser[receivers]
    return jax.ops.segment_sum(
        weights[:, None] * values[senders], receivers, num_segments=num_nodes
    )


def gat_scores(
    x: Float[Array, "N D"],
    weight: Float[Array, "Dw D"],
    attention_out: Float[Array, " Dw"],
    attention_in: Float[Array, " Dw"],
    *,
    negative_slope: float = 0.2,
) -> Float[Array, "N N"]:
    """GAT's ``e[n', n] = LeakyReLU(aᵀ [W x_n ‖ W x_n'])`` with ``a = [a_out ‖ a_in]``."""
    features = x @ weight.T
    from_output = features @ attention_out  # a_outᵀ W x_n, one per receiving node n
    from_input = features @ attention_in  # a_inᵀ W x_n', one per sending node n'
    return jax.nn.leaky_relu(from_input[:, None] + from_output[None, :], negative_slope)


def gatv2_scores(
    x: Float[Array, "N D"],
    weight_out: Float[Array, "Dw D"],
    weight_in: Float[Array, "Dw D"],
    attention: Float[Array, " Dw"],
    *,
    negative_slope: float = 0.2,
) -> Float[Array, "N N"]:
    """GATv2's ``e[n', n] = aᵀ LeakyReLU(W_out x_n + W_in x_n')``: the nonlinearity comes first."""
    pre_activation = (x @ weight_in.T)[:, None, :] + (x @ weight_out.T)[None, :, :]
    return jax.nn.leaky_relu(pre_activation, negative_slope) @ attention


def rankings(scores: Float[Array, "Nin Nout"]) -> Int[Array, "Nin Nout"]:
    """Column n lists the inputs n' from the highest score to the lowest."""
    return jnp.argsort(-scores, axis=0)


def is_static(scores: Float[Array, "Nin Nout"]) -> bool:
    """True when every query ranks the inputs in the same order.

    This is Brody et al.'s static attention.
    """
    order = rankings(scores)
    return bool(jnp.all(order == order[:, :1]))
