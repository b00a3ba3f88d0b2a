"""Relations of attention to other architectures, each as a construction with weights set by hand.

One module per relation (book chapter 11):

* :mod:`.convolution`: a convolution with an r x r window as attention with r² content-blind heads.
* :mod:`.linear_attention`: linear attention as a recurrent network; gated (state-space) form.
* :mod:`.recurrence`: softmax attention as a growing key-value cache, an online softmax, and a
  fast-weight memory with the sum and delta rules.
* :mod:`.graphs`: attention as message passing on a graph; graph attention (GAT, GATv2).
* :mod:`.mixing`: content-free token mixing (Synthesizer, MLP-Mixer) and FNet's Fourier mixing.
* :mod:`.hopfield`: the attention update as a modern Hopfield network's update rule.
* :mod:`.kernel_regression`: Nadaraya–Watson regression as attention with a per-key bias.
"""

from .convolution import (
    convolution,
    convolution_as_attention,
    grid_positions,
    kernel_offsets,
    quadratic_position_bias,
)
from .graphs import (
    adjacency_mask,
    edge_softmax_attention,
    gat_scores,
    gatv2_scores,
    is_static,
    rankings,
)
from .hopfield import attention_update, hopfield_energy, hopfield_iterates, hopfield_update
from .kernel_regression import gaussian_kernel, kernel_regression_attention, nadaraya_watson
from .linear_attention import (
    decay_mask,
    elu_plus_one,
    gated_linear_recurrence,
    linear_attention,
    linear_attention_recurrence,
    linear_attention_weights,
    masked_linear_attention,
)
from .mixing import fourier_matrices, fourier_mixing, mixing_bias
from .recurrence import (
    fast_weight_memory,
    kv_cache_attention,
    kv_cache_layer,
    online_softmax_attention,
)

__all__ = [
    "convolution",
    "convolution_as_attention",
    "grid_positions",
    "kernel_offsets",
    "quadratic_position_bias",
    "adjacency_mask",
    "edge_softmax_attention",
    "gat_scores",
    "gatv2_scores",
    "is_static",
    "rankings",
    "attention_update",
    "hopfield_energy",
    "hopfield_iterates",
    "hopfield_update",
    "gaussian_kernel",
    "kernel_regression_attention",
    "nadaraya_watson",
    "decay_mask",
    "elu_plus_one",
    "gated_linear_recurrence",
    "linear_attention",
    "linear_attention_recurrence",
    "linear_attention_weights",
    "masked_linear_attention",
    "fourier_matrices",
    "fourier_mixing",
    "mixing_bias",
    "fast_weight_memory",
    "kv_cache_attention",
    "kv_cache_layer",
    "online_softmax_attention",
]
