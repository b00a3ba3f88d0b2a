"""The package's shape annotations hold on the models' main calls (tests/annotation_checks.py).

jaxtyping's import hook must be installed before the package is first imported, and this test
session has imported it already, so the checks run in a subprocess that prints JSON.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from script_report import json_report, quick_compile

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report() -> dict:
    env = quick_compile(dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    return json_report(ROOT / "tests" / "annotation_checks.py", env)


def test_the_checker_is_live(report):
    # A ViT given an image without its channel axis: the annotation, not the model, refuses it.
    assert report["control"] == "TypeCheckError"


def test_every_checked_call_matches_its_annotations(report):
    assert report["failed"] == {}
    assert len(report["passed"]) >= 20  # every model's main calls
