"""The package's shape annotations hold on the models' main calls (tests/annotation_checks.py).

The unit session imports the package under jaxtyping's import hook (tests/conftest.py), so the
calls are checked here, in this process.
"""

from __future__ import annotations

import annotation_checks
import pytest


@pytest.fixture(scope="module")
def report() -> dict:
    return annotation_checks.main()


def test_the_checker_is_live(report):
    # A ViT given an image without its channel axis: the annotation, not the model, refuses it.
    assert report["control"] == "TypeCheckError"


def test_every_checked_call_matches_its_annotations(report):
    assert report["failed"] == {}
    assert len(report["passed"]) >= 20  # every model's main calls
