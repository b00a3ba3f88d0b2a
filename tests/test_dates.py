"""The dates data set's held-out formats and test sets: what the model never sees in training."""

import datetime

import pytest

from transformer_intro.datasets import dates


def formats_writing(text: str, iso: str) -> set[str]:
    """Every format that writes this date as this string."""
    day = datetime.date.fromisoformat(iso)
    return {name for name, write in dates.FORMATS.items() if write(day) == text}


def test_at_least_three_whole_formats_are_held_out_of_training():
    assert len(dates.HELD_OUT_FORMATS) >= 3
    assert set(dates.HELD_OUT_FORMATS) <= set(dates.FORMATS)
    assert set(dates.TRAIN_FORMATS) == set(dates.FORMATS) - set(dates.HELD_OUT_FORMATS)
    train, _ = dates.load_splits(3000, 200, seed=0)
    for text, iso in train:
        # A training string may be written by a held-out format too only if a training format
        # writes it as well ("22.10.2019"); it is never written by held-out formats alone.
        assert formats_writing(text, iso) & set(dates.TRAIN_FORMATS), text


def test_the_three_test_sets_ask_what_they_say():
    sets = dates.load_test_sets(300, seed=0)
    assert sets == dates.load_test_sets(300, seed=0)  # deterministic
    assert list(sets) == ["seen formats", "unseen formats", "unseen centuries"]
    assert all(len(pairs) == 300 for pairs in sets.values())
    for text, iso in sets["seen formats"]:
        assert formats_writing(text, iso) & set(dates.TRAIN_FORMATS)
        assert 1900 <= int(iso[:4]) <= 2099
    for text, iso in sets["unseen formats"]:
        # written by a held-out format, and by no training format
        assert formats_writing(text, iso) <= set(dates.HELD_OUT_FORMATS), text
        assert 1900 <= int(iso[:4]) <= 2099
    for text, iso in sets["unseen centuries"]:
        assert formats_writing(text, iso) & set(dates.TRAIN_FORMATS)
        assert not 1900 <= int(iso[:4]) <= 2099
        assert int(iso[:4]) in dates.UNSEEN_CENTURY_YEARS
    # every held-out format is tested, and half the dates lie in the unseen years
    written = set().union(*(formats_writing(t, i) for t, i in sets["unseen formats"]))
    assert written == set(dates.HELD_OUT_FORMATS)
    for name in ("seen formats", "unseen formats"):
        in_unseen_years = sum(int(iso[:4]) in dates.HELD_OUT_YEARS for _, iso in sets[name])
        assert in_unseen_years == 150


def test_no_test_date_is_a_training_date():
    train, test = dates.load_splits(3000, 300, seed=0)
    sets = dates.load_test_sets(300, seed=0)
    assert test == sets["seen formats"]
    train_dates = {iso for _, iso in train}
    for name, pairs in sets.items():
        assert not train_dates & {iso for _, iso in pairs}, name
    assert not {int(iso[:4]) for iso in train_dates} & dates.HELD_OUT_YEARS


def test_distinct_from_rejects_strings_a_known_format_writes():
    # d.m.yyyy and dd.mm.yyyy agree whenever day and month have two digits.
    day = datetime.date(2019, 10, 22)
    assert dates.FORMATS["d.m.yyyy"](day) == dates.FORMATS["dd.mm.yyyy"](day)
    kept = dates.make_pairs(
        200, seed=3, formats=["d.m.yyyy"], distinct_from=["dd.mm.yyyy"], years=[2019]
    )
    assert all(
        text != dates.FORMATS["dd.mm.yyyy"](datetime.date.fromisoformat(iso)) for text, iso in kept
    )
    # Negative control: without it, some of the same draws coincide.
    plain = dates.make_pairs(200, seed=3, formats=["d.m.yyyy"], years=[2019])
    assert any(
        text == dates.FORMATS["dd.mm.yyyy"](datetime.date.fromisoformat(iso)) for text, iso in plain
    )


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="test_size"):
        dates.load_test_sets(0)
    with pytest.raises(ValueError, match="unknown date format"):
        dates.make_pairs(1, seed=0, distinct_from=["dd/mm/yyyy"])
