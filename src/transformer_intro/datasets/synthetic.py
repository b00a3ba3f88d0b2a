"""Synthetic data for quick runs: random images and labels, the same on every machine.

Nothing in them is learnable; they serve where only the arithmetic matters, e.g. checking that
training on several devices or processes computes what training on one does (chapter 12).
"""

from __future__ import annotations

import numpy as np

__all__ = ["synthetic_digits"]


def synthetic_digits(
    count: int, *, seed: int = 0, image_size: int = 28
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random uint8 images, (count, image_size, image_size), and int32 labels in 0-9.

    The same seed gives the same arrays in every process, so processes need not exchange data.
    """
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (count, image_size, image_size), dtype=np.uint8)
    return images, rng.integers(0, 10, count).astype(np.int32)
