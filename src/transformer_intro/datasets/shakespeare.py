"""The complete works of Shakespeare, modern spelling, as one long string per play.

The texts ship with the package (see ``shakespeare/PROVENANCE.md``), so nothing is downloaded.
Validation holds out whole plays, never a random slice of lines: lines of the same scene share
names, rhymes and turns of phrase, and a model would be rewarded for remembering its neighbours.
"""

from __future__ import annotations

import lzma
from importlib import resources

__all__ = ["VALIDATION_PLAYS", "load_play", "load_shakespeare", "play_names"]

# About 10% of the characters, chosen once and fixed: two tragedies, two comedies.
VALIDATION_PLAYS: tuple[str, ...] = ("hamlet", "macbeth", "tempest", "twelfth_night")


def play_names() -> tuple[str, ...]:
    """Every play and poem that ships with the package, in alphabetical order."""
    folder = resources.files(__package__) / "shakespeare"
    return tuple(
        sorted(p.name[: -len(".txt.xz")] for p in folder.iterdir() if p.name.endswith(".txt.xz"))
    )


def load_play(name: str) -> str:
    """The text of one play (see :func:`play_names`), decompressed.

    Raises:
        ValueError: if no play has that name.
    """
    if name not in play_names():
        raise ValueError(f"no play named {name!r}; the plays are {', '.join(play_names())}")
    data = (resources.files(__package__) / "shakespeare" / f"{name}.txt.xz").read_bytes()
    return lzma.decompress(data).decode("utf-8")


def load_shakespeare(split: str) -> str:
    """The plays of a split joined into one text, in alphabetical order.

    ``"train"``: every play except :data:`VALIDATION_PLAYS`; ``"validation"``: those plays;
    ``"all"``: everything. Plays are separated by a blank line, as their ends already are.

    Raises:
        ValueError: if ``split`` is none of the three.
    """
    if split == "train":
        names = [n for n in play_names() if n not in VALIDATION_PLAYS]
    elif split == "validation":
        names = list(VALIDATION_PLAYS)
    elif split == "all":
        names = list(play_names())
    else:
        raise ValueError(f"split must be 'train', 'validation' or 'all', got {split!r}")
    return "\n".join(load_play(n) for n in names)
