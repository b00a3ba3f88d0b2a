"""The data sets the book trains on, each in its own module.

Each module says where its data comes from, how it is checked, and how it becomes arrays of
tokens or pixels.
"""

from .mnist import (
    MNISTChecksumError,
    MNISTDownloadError,
    MNISTError,
    MNISTFileNotFoundError,
    MNISTFormatError,
    MNISTUnavailableError,
    load_mnist,
)

__all__ = [
    "MNISTChecksumError",
    "MNISTDownloadError",
    "MNISTError",
    "MNISTFileNotFoundError",
    "MNISTFormatError",
    "MNISTUnavailableError",
    "load_mnist",
]
