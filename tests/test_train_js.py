"""The page's trainer (``_interactive/train.js``) against ``jax.grad`` and Optax, in Node.

``tests/js/train_check.js`` runs the page's forward and backward pass and AdamW on the stored
weights and batches of ``tests/fixtures/train_js.json`` (written by
``scripts/make_train_js_fixture.py`` from the book's own ``LanguageModel``, loss and
``Recipe.optimiser()``, in float64) and reports, per tensor, ``max |js - jax| / max |jax|``.
Two negative controls must fail the same comparison: the causal mask dropped (in the forward
pass, so the backward pass sees no mask either) and the query projection's backward pass reading
its weight transposed (the forward pass, and so the loss, unchanged).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "train_js.json"
CHECK = REPO / "tests" / "js" / "train_check.js"
RELATIVE = 1e-5  # the tolerance; float64 on both sides, measured about 2e-7
WRONG = 1e-2  # a control must miss by at least this much


@pytest.fixture(scope="module")
def report() -> dict:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Node is needed for tests/test_train_js.py: install Node 20 (apt nodejs)")
        pytest.skip("Node is not installed: the page's trainer is not checked")
    done = subprocess.run(
        [node, str(CHECK), str(FIXTURE)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def fixture() -> dict:
    return json.loads(FIXTURE.read_text())


def test_fixture_covers_every_branch(fixture, report):
    """Every parameter is compared, and the gradients are large enough to be clipped."""
    assert report["parameters"] == report["count"]
    assert all(s["grad_norm"] > fixture["recipe"]["clip_norm"] for s in fixture["steps"])
    assert len(report["gradient"]) == 4 + 12 * fixture["config"]["num_blocks"] + 1


def test_loss_equals_jax(report):
    assert report["loss"]["js"] == pytest.approx(report["loss"]["jax"], rel=RELATIVE)


def test_every_gradient_equals_jax_grad(report):
    worst = {name: d for name, d in report["gradient"].items() if d > RELATIVE}
    assert not worst, f"gradients differ from jax.grad: {worst}"


def test_without_the_causal_mask_the_gradients_differ(report):
    control = report["noCausalMask"]
    assert max(control["gradient"].values()) > WRONG
    attention = [v for k, v in control["gradient"].items() if "attention." in k]
    assert min(attention) > WRONG, "every attention projection's gradient should change"


def test_a_transposed_weight_in_the_backward_pass_is_caught(report):
    control = report["transposedQueryBackward"]
    assert control["loss"] == pytest.approx(report["loss"]["js"], rel=1e-12)  # forward unchanged
    assert max(control["gradient"].values()) > WRONG
    # the query projection's own gradient is right; what lies before it (the first block's
    # LayerNorm, the table) is wrong
    assert control["gradient"]["tokeniser.table"] > WRONG


def test_adamw_step_equals_optax(report):
    for t, step in enumerate(report["optimiser"]):
        assert step["grad_norm"] == pytest.approx(step["jax_grad_norm"], rel=1e-12)
        worst = {k: v for k, v in step["weights"].items() if v > RELATIVE}
        assert not worst, f"step {t}: weights differ from Optax's: {worst}"


def test_three_training_steps_equal_jax(report):
    for t, step in enumerate(report["training"]):
        assert step["loss"] == pytest.approx(step["jax_loss"], rel=RELATIVE), t
        worst = {k: v for k, v in step["weights"].items() if v > RELATIVE}
        assert not worst, f"step {t}: weights differ from JAX's: {worst}"
