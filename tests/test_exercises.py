"""The checked exercises: every reference solution passes, every typical mistake gets its own
diagnosis, and a cell not yet written runs without raising."""

import importlib.util
import inspect
import json
import re
from pathlib import Path

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


@pytest.mark.parametrize("chapter", range(1, 21))
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


# -- The chapters pose the registry's exercises, numbered apart from the reasoning ones ----------

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in (REPO / "book").glob("[0-9][0-9]_*.ipynb") if int(p.name[:2]) > 0)


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checked_names(notebook: Path) -> list[str]:
    """The exercises a chapter's code cells check, in the order they first do."""
    names = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            for name in re.findall(r"^check\((\w+)", "".join(cell["source"]), re.MULTILINE):
                if name not in names:
                    names.append(name)
    return names


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_every_registered_exercise_is_posed_in_its_chapter_in_order(notebook):
    registered = [e.name for e in exercises_for_chapter(int(notebook.name[:2]))]
    assert _checked_names(notebook) == registered, (
        f"{notebook.name} checks {_checked_names(notebook)}; the registry has {registered}"
    )


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_coding_exercises_are_numbered_apart_from_the_reasoning_ones(notebook):
    pending = _script("renumber_exercises").renumber_notebook(notebook, write=False)
    assert not pending, "run python scripts/renumber_exercises.py book/[0-9][0-9]_*.ipynb: " + (
        "; ".join(pending)
    )


def _cell(kind, text, **extra):
    return {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True), **extra}


def test_renumbering_numbers_in_order_rewrites_references_and_is_idempotent(tmp_path):
    output = {"output_type": "stream", "name": "stdout", "text": ["PASS: ...\n"]}
    cells = [
        _cell("markdown", "# A chapter\n\n## Exercises\n\n1. **One.** As in exercise 3.1."),
        _cell("markdown", "**Coding exercise 3.1: the softmax.**"),
        _cell("code", "check(column_softmax)", outputs=[output], execution_count=1),
        _cell("markdown", "**Coding exercise 3.C7: the mask.**\n\nAs coding exercise 3.1 did."),
    ]
    notebook = tmp_path / "03_x.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}}, indent=1) + "\n")
    renumber = _script("renumber_exercises")
    assert len(renumber.renumber_notebook(notebook)) == 2
    after = json.loads(notebook.read_text())["cells"]
    text = ["".join(c["source"]) for c in after]
    assert text[0] == "".join(cells[0]["source"])  # a reasoning exercise keeps its number
    assert text[1] == "**Coding exercise 3.C1: the softmax.**"
    assert text[3] == "**Coding exercise 3.C2: the mask.**\n\nAs coding exercise 3.C1 did."
    assert after[2] == cells[2]  # code, outputs and all, untouched
    written = notebook.read_text()
    assert renumber.renumber_notebook(notebook) == [] and notebook.read_text() == written
    index = _script("exercise_index")
    assert index.exercises(notebook)[2] == ["the softmax", "the mask"]
