"""Dates written the ways people write them, paired with their ISO 8601 form.

A small translation task (chapter 10), generated from a seed, with nothing to download.

    "Monday 22 April 2019", "22 Apr 2019", "04/22/2019", "april 22, 2019"  ->  "2019-04-22"

Every source string determines its date. The formats that could be read two ways are kept apart
by their separator: a slash always means month/day/year (the US order, "04/22/2019"), a dot always
means day.month.year (the European order, "22.04.2019"), and years are always written with four
digits ("22.04.19" could be 1919 or 2019, so it is not generated). Weekday names, where a format
has one, are the true weekday of the date, computed by :mod:`datetime`; the English month and
weekday names are spelled out here rather than taken from :mod:`calendar`, whose names follow the
machine's locale.

Splits. All training dates fall in :data:`YEARS` (1900-2099) and are written in the
:data:`TRAIN_FORMATS`; the four :data:`HELD_OUT_FORMATS` never appear in training. Twenty of the
200 years, drawn once with :data:`HELD_OUT_SEED` (:data:`HELD_OUT_YEARS`), never appear in
training either, in any format. :func:`load_test_sets` gives three held-out sets that ask
different questions: *seen formats* (the training formats; half the dates from the unseen years,
half from the training years), *unseen formats* (the held-out formats, same years), and *unseen
centuries* (the training formats, years 1800-1899 and 2100-2199, :data:`UNSEEN_CENTURY_YEARS`).
No test date of the first two sets appears in training, in any format. The unseen years are
scattered through the range rather than cut from one end: a character model that has never seen
"207" begin a year has no reason to write it, which is what the unseen centuries measure. Each
example's format is drawn uniformly with the split's own ``random.Random``, so the same seed gives
the same pairs on any machine.

Tokens are characters. The source vocabulary holds every character a format can produce; the
target vocabulary the digits and "-". Both start with the same three special symbols (padding,
start and end of a target), so their ids 0, 1, 2 mean the same thing on both sides.
"""

from __future__ import annotations

import calendar
import datetime
import itertools
import random
import string
from collections.abc import Callable, Iterable

import numpy as np
from jaxtyping import ArrayLike, Int

from ..tokenisers import Vocabulary

__all__ = [
    "END",
    "END_ID",
    "FORMATS",
    "HELD_OUT_FORMATS",
    "HELD_OUT_SEED",
    "HELD_OUT_YEARS",
    "ISO_LENGTH",
    "MAX_SOURCE_LENGTH",
    "MONTHS",
    "PAD",
    "PAD_ID",
    "SOURCE_VOCABULARY",
    "SPECIALS",
    "START",
    "START_ID",
    "TARGET_LENGTH",
    "TARGET_VOCABULARY",
    "TRAIN_FORMATS",
    "TRAIN_YEARS",
    "UNSEEN_CENTURY_YEARS",
    "WEEKDAYS",
    "YEARS",
    "decode_target",
    "encode_sources",
    "encode_targets",
    "load_splits",
    "load_test_sets",
    "make_pairs",
    "ordinal",
]

PAD, START, END = "<pad>", "<start>", "<end>"
SPECIALS = (PAD, START, END)
PAD_ID, START_ID, END_ID = 0, 1, 2

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

YEARS = (1900, 2099)
HELD_OUT_SEED = 2019
HELD_OUT_YEARS = frozenset(random.Random(HELD_OUT_SEED).sample(range(YEARS[0], YEARS[1] + 1), 20))
TRAIN_YEARS = tuple(sorted(set(range(YEARS[0], YEARS[1] + 1)) - HELD_OUT_YEARS))
# Years of two centuries the training data never writes: the first two digits 18 and 21.
UNSEEN_CENTURY_YEARS = tuple(range(1800, 1900)) + tuple(range(2100, 2200))

# Every source is at most this many characters long (the longest format, a Wednesday in
# September, has 29); a longer string is an error rather than a silent truncation.
MAX_SOURCE_LENGTH = 32
ISO_LENGTH = len("2019-04-22")
# The decoder reads <start> and the ten ISO characters and predicts the ten characters and <end>.
TARGET_LENGTH = ISO_LENGTH + 1


def ordinal(day: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st, 22nd, 23rd, ..., 31st."""
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _month(d: datetime.date) -> str:
    return MONTHS[d.month - 1]


def _weekday(d: datetime.date) -> str:
    return WEEKDAYS[d.weekday()]


# One function per format: date -> the string a person might write.
FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "day month year": lambda d: f"{d.day} {_month(d)} {d.year}",
    "weekday day month year": lambda d: f"{_weekday(d)} {d.day} {_month(d)} {d.year}",
    "weekday, month day, year": lambda d: f"{_weekday(d)}, {_month(d)} {d.day}, {d.year}",
    "day mon year": lambda d: f"{d.day} {_month(d)[:3]} {d.year}",
    "wkd, dd mon year": lambda d: f"{_weekday(d)[:3]}, {d.day:02d} {_month(d)[:3]} {d.year}",
    "month day, year": lambda d: f"{_month(d)} {d.day}, {d.year}",
    "lower case": lambda d: f"{_month(d).lower()} {d.day}, {d.year}",
    "mon. day, year": lambda d: f"{_month(d)[:3]}. {d.day}, {d.year}",
    "ordinal day month year": lambda d: f"{ordinal(d.day)} {_month(d)} {d.year}",
    "month ordinal, year": lambda d: f"{_month(d)} {ordinal(d.day)}, {d.year}",
    "the ordinal of month year": lambda d: f"the {ordinal(d.day)} of {_month(d)} {d.year}",
    "upper case": lambda d: f"{d.day} {_month(d).upper()} {d.year}",
    "mm/dd/yyyy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "m/d/yyyy": lambda d: f"{d.month}/{d.day}/{d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
    "yyyy-mm-dd": lambda d: d.isoformat(),
}

# Whole formats kept out of training, chosen to differ in kind: an abbreviation followed by a
# full stop ("Apr. 22, 2019"), a phrase around an ordinal ("the 22nd of April 2019"), dotted digits
# without leading zeros ("22.4.2019"), and month names in capitals ("22 APRIL 2019"). Each of their
# parts appears in some training format except the capitals after the first letter.
HELD_OUT_FORMATS = ("mon. day, year", "the ordinal of month year", "d.m.yyyy", "upper case")
TRAIN_FORMATS = tuple(name for name in FORMATS if name not in HELD_OUT_FORMATS)

SOURCE_VOCABULARY = Vocabulary(string.ascii_letters + string.digits + " ,./-", specials=SPECIALS)
TARGET_VOCABULARY = Vocabulary(string.digits + "-", specials=SPECIALS)


def make_pairs(
    count: int,
    *,
    seed: int,
    years: Iterable[int] = TRAIN_YEARS,
    exclude: Iterable[datetime.date] = (),
    formats: Iterable[str] | None = None,
    distinct_from: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """``count`` pairs (human-written date, ISO 8601 date), drawn with ``random.Random(seed)``.

    The dates are drawn uniformly from the days of ``years``, each written in a format chosen
    uniformly from ``formats`` (all of :data:`FORMATS` by default).

    Dates in ``exclude`` are never drawn (the training set leaves out every test date). A string
    that one of the formats ``distinct_from`` also writes for its date is drawn again: "22.10.2019"
    is both "d.m.yyyy" and "dd.mm.yyyy", so it cannot test the first format if the second is known.

    Raises:
        ValueError: if a format name is unknown, or ``years`` is empty or outside 1-9999.
    """
    names = list(FORMATS) if formats is None else list(formats)
    others = list(distinct_from)
    unknown = [name for name in names + others if name not in FORMATS]
    if unknown:
        raise ValueError(f"unknown date format(s) {unknown}; the formats are {list(FORMATS)}")
    years = sorted(set(years))
    if not years or years[0] < 1 or years[-1] > 9999:
        raise ValueError("years must be a non-empty collection of years between 1 and 9999")
    weights = list(itertools.accumulate(366 if calendar.isleap(year) else 365 for year in years))
    excluded = frozenset(exclude)
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < count:
        year = rng.choices(years, cum_weights=weights)[0]
        day = datetime.date(year, 1, 1) + datetime.timedelta(
            days=rng.randrange(365 + calendar.isleap(year))
        )
        name = rng.choice(names)  # drawn before the rejection, so exclusions do not shift formats
        text = FORMATS[name](day)
        if day not in excluded and all(FORMATS[other](day) != text for other in others):
            pairs.append((text, day.isoformat()))
    return pairs


def _mixed_years(test_size: int, seed: int, **options) -> list[tuple[str, str]]:
    """Half the pairs from the unseen years, half from the training years, interleaved."""
    unseen = make_pairs(test_size // 2, seed=seed, years=HELD_OUT_YEARS, **options)
    seen = make_pairs(test_size - test_size // 2, seed=seed + 1000, years=TRAIN_YEARS, **options)
    return (
        [pair for pairs in zip(unseen, seen) for pair in pairs]
        + unseen[len(seen) :]
        + seen[len(unseen) :]
    )


def load_test_sets(test_size: int = 2000, *, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """Three held-out sets of ``test_size`` pairs each, keyed by what they test.

    * ``"seen formats"``: :data:`TRAIN_FORMATS`, half the dates in :data:`HELD_OUT_YEARS`;
    * ``"unseen formats"``: :data:`HELD_OUT_FORMATS`, half the dates in :data:`HELD_OUT_YEARS`,
      and never a string that a training format also writes;
    * ``"unseen centuries"``: :data:`TRAIN_FORMATS`, years in :data:`UNSEEN_CENTURY_YEARS`.

    Raises:
        ValueError: if ``test_size`` < 1.
    """
    if test_size < 1:
        raise ValueError(f"test_size must be at least 1, got {test_size}")
    return {
        "seen formats": _mixed_years(test_size, 2 * seed + 1, formats=TRAIN_FORMATS),
        "unseen formats": _mixed_years(
            test_size, 2 * seed + 5001, formats=HELD_OUT_FORMATS, distinct_from=TRAIN_FORMATS
        ),
        "unseen centuries": make_pairs(
            test_size, seed=2 * seed + 9001, years=UNSEEN_CENTURY_YEARS, formats=TRAIN_FORMATS
        ),
    }


def load_splits(
    train_size: int,
    test_size: int = 2000,
    *,
    seed: int = 0,
    formats: Iterable[str] = TRAIN_FORMATS,
) -> tuple[list, list]:
    """Training pairs, and the held-out test pairs in the seen formats.

    The training pairs come from :data:`TRAIN_YEARS`, written in ``formats`` (the
    :data:`TRAIN_FORMATS` by default); the test pairs are ``load_test_sets(...)["seen formats"]``.
    No date of the seen-format or unseen-format test sets appears in the training pairs, in any
    format.

    Returns:
        ``(train, test)``, two lists of (human-written date, ISO 8601 date) pairs.
    """
    tests = load_test_sets(test_size, seed=seed)
    test_dates = [
        datetime.date.fromisoformat(iso)
        for name in ("seen formats", "unseen formats")
        for _, iso in tests[name]
    ]
    train = make_pairs(
        train_size, seed=2 * seed, years=TRAIN_YEARS, exclude=test_dates, formats=formats
    )
    return train, tests["seen formats"]


def encode_sources(texts: Iterable[str], length: int = MAX_SOURCE_LENGTH) -> np.ndarray:
    """Character ids of each source, padded with ``<pad>`` to ``length``: int32, (B, length).

    Raises:
        ValueError: naming the string, if it has a character outside the source vocabulary or
            is longer than ``length``.
    """
    texts = list(texts)
    ids = np.full((len(texts), length), PAD_ID, dtype=np.int32)
    for row, text in enumerate(texts):
        if len(text) > length:
            raise ValueError(
                f"date string {text!r} has {len(text)} characters; the model reads at most {length}"
            )
        try:
            ids[row, : len(text)] = SOURCE_VOCABULARY.encode(text)
        except ValueError as error:
            raise ValueError(f"cannot read date string {text!r}: {error}") from None
    return ids


def encode_targets(
    isos: Iterable[str], length: int = TARGET_LENGTH
) -> tuple[np.ndarray, np.ndarray]:
    """Teacher forcing's two arrays, each int32 (B, length), padded with ``<pad>``.

    Decoder inputs ``<start> 2 0 1 9 - 0 4 - 2 2`` and targets ``2 0 1 9 - 0 4 - 2 2 <end>``: the
    inputs are the targets shifted one place to the right, so that position n predicts
    character n + 1.

    Returns:
        ``(inputs, targets)``.

    Raises:
        ValueError: if a target does not fit ``length`` positions with its ``<end>``.
    """
    isos = list(isos)
    inputs = np.full((len(isos), length), PAD_ID, dtype=np.int32)
    targets = np.full((len(isos), length), PAD_ID, dtype=np.int32)
    for row, iso in enumerate(isos):
        if len(iso) + 1 > length:
            raise ValueError(f"target {iso!r} needs {len(iso) + 1} positions, more than {length}")
        ids = TARGET_VOCABULARY.encode(iso)
        inputs[row, : len(iso) + 1] = np.concatenate([[START_ID], ids])
        targets[row, : len(iso) + 1] = np.concatenate([ids, [END_ID]])
    return inputs, targets


def decode_target(ids: Iterable[int] | Int[ArrayLike, ...]) -> str:
    """The characters of a decoded target up to its first ``<end>`` (or padding)."""
    ids = list(np.asarray(ids).reshape(-1))
    stop = next((i for i, t in enumerate(ids) if t in (END_ID, PAD_ID)), len(ids))
    return TARGET_VOCABULARY.decode(ids[:stop], skip_specials=True)
