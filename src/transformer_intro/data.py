"""Old home of the MNIST loader, kept so that code written against it still imports: the module is
now `transformer_intro.datasets.mnist`."""

from .datasets.mnist import *  # noqa: F403
from .datasets.mnist import __all__  # noqa: F401
