"""The checked exercises: every reference solution passes, every typical mistake gets its own
diagnosis, and a cell not yet written runs without raising."""

import inspect

import numpy as np
import pytest
from exercise_mistakes import MISTAKES

from transformer_intro.exercises import (
    EXERCISES,
    NOT_WRITTEN,
    check,
    exercises_for_chapter,
    solutions,
)

NAMES = list(EXERCISES)


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name):
    result = check(getattr(solutions, name))
    assert result.passed, str(result)
    assert str(result).startswith("PASS: ")


MISTAKE_CASES = [
    pytest.param(name, i, id=f"{name}-{key}")
    for name, entries in MISTAKES.items()
    for i, (_, key) in enumerate(entries)
]


@pytest.mark.parametrize("name, index", MISTAKE_CASES)
def test_mistake_gets_its_diagnosis(name, index):
    wrong, key = MISTAKES[name][index]
    result = check(wrong, name)
    assert not result.passed
    assert result.diagnosis == key, str(result)
    text = str(result)
    assert text.startswith("FAIL on case '") and len(text) < 600, text


def test_every_exercise_has_two_mistakes_with_their_own_diagnoses():
    assert set(MISTAKES) == set(EXERCISES)
    for name, entries in MISTAKES.items():
        keys = [key for _, key in entries]
        assert len(set(keys)) >= 2, name


def test_diagnosis_keys_are_unique_within_an_exercise():
    for exercise in EXERCISES.values():
        keys = [d.key for d in exercise.diagnoses]
        assert len(keys) == len(set(keys)), exercise.name


@pytest.mark.parametrize("chapter", range(1, 17))
def test_three_exercises_per_chapter(chapter):
    assert len(exercises_for_chapter(chapter)) >= 3


def test_not_written_yet_does_not_raise():
    def column_softmax(scores):
        raise NotImplementedError

    result = check(column_softmax)
    assert result.status == "not written" and not result
    assert str(result).startswith(NOT_WRITTEN)
    assert repr(result) == str(result)


def test_wrong_shape_is_named():
    result = check(lambda x, weights: (weights.T @ x)[:, :1], "weighted_average")
    assert result.diagnosis == "shape", str(result)
    assert "expected, got" in str(result)


def test_transpose_is_named():
    result = check(lambda x, weights: x.T @ weights, "weighted_average")
    assert result.diagnosis == "transposed"
    assert "shape (4, 3) expected, got (3, 4)" in str(result)


def test_errors_in_the_readers_code_are_reported():
    def token_rows(table, ids):
        return table[ids] @ np.ones((3, 3))

    result = check(token_rows)
    assert result.diagnosis == "exception"
    assert "raised TypeError" in str(result) or "raised ValueError" in str(result)


def test_a_missing_return_is_named():
    result = check(lambda scores: None, "column_softmax")
    assert result.diagnosis == "no_return"


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="no exercise"):
        check(lambda: None, "no_such_exercise")


def test_exercise_objects_check_too():
    assert EXERCISES["causal_mask_by_hand"].check(solutions.causal_mask_by_hand)


def test_solutions_are_short_and_named_after_their_exercise():
    for name in EXERCISES:
        source = inspect.getsource(getattr(solutions, name))
        assert source.startswith(f"def {name}(")
        assert max(map(len, source.splitlines())) <= 79, name
