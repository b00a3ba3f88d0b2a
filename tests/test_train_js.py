"""The page's trainer (``_interactive/train.js``) against ``jax.grad`` and Optax, in Node.

``tests/js/train_check.js`` runs the page's forward and backward pass and AdamW on the stored
weights and batches of ``tests/fixtures/train_js.json`` (written by
``scripts/make_train_js_fixture.py`` from the book's own ``LanguageModel``, loss and
``Recipe.optimiser()``, in float64) and reports, per tensor, ``max |js - jax| / max |jax|``.
Two negative controls must fail the same comparison: the causal mask dropped (in the forward
pass, so the backward pass sees no mask either) and the query projection's backward pass reading
its weight transposed (the forward pass, and so the loss, unchanged). The page's forward pass is
infer.js's: on chapter 9's saved model both compute the same logits (``tests/js/forward_check.js``),
and the plays the widget learns from are the package's texts.
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
    node = _node()
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


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Node is needed for tests/test_train_js.py: install Node 20 (apt nodejs)")
        pytest.skip("Node is not installed: the page's trainer is not checked")
    return node


def test_forward_pass_is_infer_js_on_chapter_9s_model(tmp_path):
    """train.js's batched forward pass computes what infer.js computes, on the saved model."""
    import numpy as np

    from transformer_intro.datasets.shakespeare import load_shakespeare
    from transformer_intro.export import read_export

    node = _node()
    payload, _ = read_export(REPO / "_interactive" / "models" / "lm.js")
    symbols = payload["extra"]["symbols"]
    text = load_shakespeare("validation")
    window = payload["config"]["window"]
    starts = np.linspace(0, len(text) - window, 4).astype(int)
    windows = [[symbols.index(c) for c in text[s : s + window]] for s in starts]
    (tmp_path / "windows.json").write_text(json.dumps(windows))

    def compare(*flags):
        done = subprocess.run(
            [node, str(REPO / "tests" / "js" / "forward_check.js"), str(tmp_path / "windows.json")]
            + list(flags),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    result = compare()
    assert result["windows"] == 4 and result["positions"] == window
    assert result["largest"] <= 1e-9 * result["scale"], result  # float64 on both sides
    control = compare("--no-causal-mask")  # train.js reading the future must differ
    assert control["largest"] > 1e-2 * control["scale"], control


def test_plays_hold_the_packages_texts():
    """_interactive/plays/*.js are scripts/make_train_plays.py's output for the package's plays."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_train_plays", REPO / "scripts" / "make_train_plays.py"
    )
    plays = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plays)
    from transformer_intro.datasets.shakespeare import load_play

    for name in plays.PLAYS:
        path = plays.OUT_DIR / f"{name}.js"
        assert path.is_file(), f"run scripts/make_train_plays.py to write {path}"
        assert plays.read_play(path) == load_play(name), f"{path} is out of date"
    assert sorted(p.stem for p in plays.OUT_DIR.glob("*.js")) == sorted(plays.PLAYS)
