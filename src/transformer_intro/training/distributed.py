"""The old home of the small ViT and the synthetic data of the multi-process demonstration.

Kept so that ``from transformer_intro.training.distributed import SMALL_VIT, synthetic_digits``
(chapter 12) still works. The model's configuration lives in :mod:`transformer_intro.models.vit`,
the data in :mod:`transformer_intro.datasets.synthetic`, and the demonstration itself, run as
``python -m transformer_intro.demos.multi_process``, in :mod:`transformer_intro.demos`, above the
tasks it trains (training sits below them).
"""

from __future__ import annotations

from ..datasets.synthetic import synthetic_digits
from ..models.vit import SMALL_VIT

__all__ = ["SMALL_VIT", "synthetic_digits"]
