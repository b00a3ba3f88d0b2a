"""The reader's experiments: a chapter's training cell replays the saved run or trains a variant.

``fit_or_replay`` replays the saved run's first steps when nothing differs from it, and trains
the reader's run when anything does (recipe, model, seed, starting weights, data), naming what
differs. The chapter tests change the recipe of chapters 8 and 9, shortened so that they run in
seconds, and run the rest of the chapter's code cells on the variant, with a control that the
unchanged recipe still replays.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from factories import tiny_lm, tiny_vit
from test_training import digits  # the same learnable toy digits (tests/ is on the path)

from transformer_intro import VisionTransformer
from transformer_intro.adapters import LoRALanguageModel
from transformer_intro.models import LanguageModel
from transformer_intro.tasks import ImageClassification, SupervisedPairs
from transformer_intro.training import (
    CheckpointError,
    Recipe,
    Run,
    RunDiverged,
    fit,
    fit_or_replay,
    load_adapter,
    load_checkpoint,
    retrace,
    save_adapter,
    save_checkpoint,
)

ROOT = Path(__file__).resolve().parents[1]
TINY_VIT = tiny_vit(num_classes=4)


RECIPE = Recipe(steps=12, batch_size=16, learning_rate=3e-3, warmup_steps=2, steps_per_call=4)


def start(config=TINY_VIT, seed=0):
    return VisionTransformer(config, key=jax.random.PRNGKey(seed))


@pytest.fixture(scope="module")
def task():
    return ImageClassification(digits(), digits(32, seed=1), max_shift=1, eval_batch_size=20)


@pytest.fixture(scope="module")
def saved(task, tmp_path_factory):
    """A saved run of RECIPE from start(), as a chapter's committed checkpoint is."""
    model, history = fit(start(), task, RECIPE, eval_every=4, progress=False)
    path = tmp_path_factory.mktemp("saved") / "run.eqx"
    save_checkpoint(path, model, recipe=RECIPE, history=history, step=RECIPE.steps)
    return path, model, history


class Counter:
    """A callback that records the steps at which it was called."""

    def __init__(self):
        self.called = []

    def __call__(self, step, model, history):
        self.called.append(step)


def leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(x, y)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


def test_unchanged_run_replays_its_first_steps_and_loads_the_saved_run(task, saved, capsys):
    path, model, history = saved
    before = path.read_bytes()
    seen = Counter()
    run = fit_or_replay(start(), task, RECIPE, path, replay_steps=8, callbacks=[seen])
    assert isinstance(run, Run) and not run.variant and run.changes == ()
    assert seen.called == [4, 8]  # trained no step beyond K = 8
    assert run.replayed.step == [4, 8]
    assert leaves_equal(run.model, model) and run.history == history and run.recipe == RECIPE
    trained, logged = run  # unpacks as fit's result
    assert trained is run.model and logged is run.history
    printed = capsys.readouterr().out
    assert "steps 1-8 retrace the saved run (every logged loss within 1e-3)" in printed
    assert "variant" not in printed
    assert path.read_bytes() == before


def test_a_changed_recipe_field_is_named_with_both_values_and_trained(task, saved, capsys):
    path, model, history = saved
    before = path.read_bytes()
    changed = RECIPE.replace(learning_rate=1e-2, steps=8)
    seen = Counter()
    run = fit_or_replay(
        start(),
        task,
        changed,
        path,
        replay_steps=8,
        eval_every=4,
        callbacks=[seen],
        progress=False,
    )
    assert run.variant and run.replayed is None and run.info is None
    assert run.changes == ("steps 12 -> 8", "learning_rate 0.003 -> 0.01")
    printed = capsys.readouterr().out
    assert printed.startswith("steps 12 -> 8, learning_rate 0.003 -> 0.01: training your variant")
    assert re.search(r"about \d+ seconds? at the saved run's speed", printed)
    # what was trained is the reader's run: fit's own result for that recipe
    expected, expected_history = fit(start(), task, changed, eval_every=4, progress=False)
    assert leaves_equal(run.model, expected)
    assert run.history.train_loss == expected_history.train_loss  # the clock differs
    assert run.history.step[-1] == 8 and seen.called == [4, 8]
    assert not leaves_equal(run.model, model)
    assert path.read_bytes() == before  # the saved run is left as it was


def test_a_changed_model_configuration_is_named_and_trained(task, saved, capsys):
    path, _, _ = saved
    wider = TINY_VIT.replace(block=TINY_VIT.block.replace(dim=32, mlp_hidden_dim=64))
    run = fit_or_replay(start(wider), task, RECIPE, path, replay_steps=4, progress=False)
    assert run.variant and run.changes == (
        "model block.dim 16 -> 32",
        "model block.mlp_hidden_dim 32 -> 64",
    )
    assert "model block.dim 16 -> 32, model block.mlp_hidden_dim 32 -> 64: training your" in (
        capsys.readouterr().out
    )
    assert run.model.config == wider and run.history.step[-1] == RECIPE.steps


def test_a_changed_seed_is_named_and_trained(task, saved, capsys):
    path, _, history = saved
    run = fit_or_replay(start(), task, RECIPE.replace(seed=1), path, replay_steps=4, progress=False)
    assert run.variant and run.changes == ("seed 0 -> 1",)
    assert "seed 0 -> 1: training your variant" in capsys.readouterr().out
    assert run.history.train_loss != history.train_loss  # other batches


def test_other_starting_weights_or_data_are_found_by_the_replay_and_trained(task, saved, capsys):
    path, _, history = saved
    seen = Counter()
    run = fit_or_replay(
        start(seed=1), task, RECIPE, path, replay_steps=8, callbacks=[seen], progress=False
    )
    printed = capsys.readouterr().out
    assert run.variant and run.changes == ()
    # the replay stopped at its first logged span, then the variant trained all its steps
    assert seen.called == [4, 4, 8, 12]
    assert "steps 1 to 4 logged a training loss" in printed
    assert "your starting weights or data differ from the saved run's" in printed
    assert "training your variant here" in printed
    other_data = ImageClassification(digits(seed=2), digits(32, seed=1), max_shift=1)
    run = fit_or_replay(start(), other_data, RECIPE, path, replay_steps=8, progress=False)
    assert run.variant and run.history.train_loss != history.train_loss


def test_train_all_trains_the_unchanged_run_and_says_it_is_not_a_variant(task, saved, capsys):
    path, model, history = saved
    run = fit_or_replay(
        start(), task, RECIPE, path, replay_steps=4, train_all=True, eval_every=4, progress=False
    )
    printed = capsys.readouterr().out
    assert not run.variant and "variant" not in printed and "train_all=True" in printed
    assert run.history.train_loss == pytest.approx(history.train_loss, rel=1e-5)


def test_extra_is_compared_and_a_variant_is_never_saved_over_the_saved_run(
    task, saved, tmp_path, capsys
):
    path, _, _ = saved
    with_extra = tmp_path / "with_extra.eqx"
    model, history = load_checkpoint(path)[0], load_checkpoint(path)[1].history
    save_checkpoint(
        with_extra, model, recipe=RECIPE, history=history, step=12, extra={"symbols": list("ab")}
    )
    same = fit_or_replay(
        start(), task, RECIPE, with_extra, replay_steps=4, extra={"symbols": ["a", "b"]}
    )
    assert not same.variant
    other = fit_or_replay(
        start(),
        task,
        RECIPE.replace(steps=4, warmup_steps=1),
        with_extra,
        replay_steps=4,
        extra={"symbols": list("abc")},
        save_path=tmp_path / "mine.eqx",
        progress=False,
    )
    assert other.variant and "symbols (another one than the saved run's)" in other.changes
    reloaded, info = load_checkpoint(tmp_path / "mine.eqx")
    assert leaves_equal(reloaded, other.model) and info.extra == {"symbols": ["a", "b", "c"]}
    with pytest.raises(ValueError, match="a variant is saved elsewhere"):
        fit_or_replay(
            start(),
            task,
            RECIPE.replace(seed=3),
            path,
            replay_steps=4,
            save_path=path,
            progress=False,
        )
    with pytest.raises(ValueError, match="multiple of recipe.steps_per_call=4"):
        fit_or_replay(start(), task, RECIPE, path, replay_steps=6)


def test_claim_asserts_on_the_saved_run_and_reports_on_a_variant(task, saved, capsys):
    path, _, _ = saved
    replayed = fit_or_replay(start(), task, RECIPE, path, replay_steps=4)
    replayed.claim(True, "the loss falls")
    assert capsys.readouterr().out.endswith("loaded its 12 steps\n")  # nothing printed
    with pytest.raises(AssertionError, match="the saved run should show this.*the loss falls"):
        replayed.claim(False, "the loss falls")
    capsys.readouterr()
    variant = fit_or_replay(
        start(),
        task,
        RECIPE.replace(steps=4, warmup_steps=1),
        path,
        replay_steps=4,
        progress=False,
    )
    capsys.readouterr()
    variant.claim(False, "the loss falls")
    assert capsys.readouterr().out == "your run: the loss falls: no\n"


def test_run_diverged_names_the_fix(task, saved):
    path, _, _ = saved
    with pytest.raises(RunDiverged) as raised:
        retrace(start(seed=1), task, path, steps=8, progress=False)
    message = str(raised.value)
    assert "this is not the saved run" in message and "fit_or_replay" in message
    assert "trains any variant" in message


# -- a low-rank adapter's run (chapter 16's SmolLM2 adapter, in miniature) ----------------------

TINY_LM = tiny_lm(vocab_size=13, num_blocks=2)
ADAPTER_RECIPE = Recipe(
    steps=12, batch_size=8, learning_rate=1e-2, warmup_steps=2, weight_decay=0.0, steps_per_call=4
)


def lm_base(seed=0):
    return LanguageModel(TINY_LM, key=jax.random.PRNGKey(seed))


def start_adapter(base, rank=2, alpha=None, seed=0):
    return LoRALanguageModel(base, rank, alpha=alpha, key=jax.random.PRNGKey(seed))


@pytest.fixture(scope="module")
def pairs_task():
    """Reverse three symbols: a task the adapters learn from the base's random features."""
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, 13, (64, 3))
    pairs = [(list(p), list(p[::-1])) for p in prompts]
    return SupervisedPairs(pairs, pairs[:16], window=8, vocab_size=13)


@pytest.fixture(scope="module")
def saved_adapter(pairs_task, tmp_path_factory):
    """A saved adapter run of ADAPTER_RECIPE on lm_base(), as chapter 16's committed one is."""
    base = lm_base()
    lora, history = fit(start_adapter(base), pairs_task, ADAPTER_RECIPE, progress=False)
    path = tmp_path_factory.mktemp("adapter") / "adapter.eqx"
    save_adapter(
        path, lora, recipe=ADAPTER_RECIPE, history=history, step=12, extra={"train_size": 64}
    )
    return path, lora, history


def test_an_adapter_file_keeps_its_recipe_history_and_step(saved_adapter):
    path, lora, history = saved_adapter
    loaded, info = load_adapter(path, lora.base)
    assert info.recipe == ADAPTER_RECIPE and info.history == history and info.step == 12
    assert info.extra == {"train_size": 64}
    assert leaves_equal(loaded.adapters, lora.adapters)


def test_an_unchanged_adapter_run_replays_and_loads_the_saved_adapter(
    pairs_task, saved_adapter, capsys
):
    path, lora, history = saved_adapter
    before = path.read_bytes()
    run = fit_or_replay(
        start_adapter(lm_base()),
        pairs_task,
        ADAPTER_RECIPE,
        path,
        replay_steps=8,
        extra={"train_size": 64},
    )
    assert not run.variant and run.changes == () and run.replayed.step == [4, 8]
    assert isinstance(run.model, LoRALanguageModel)
    assert leaves_equal(run.model, lora) and run.history == history
    assert "steps 1-8 retrace the saved run" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_a_changed_rank_or_scale_is_named_trained_and_saved_as_an_adapter(
    pairs_task, saved_adapter, tmp_path, capsys
):
    path, lora, _ = saved_adapter
    run = fit_or_replay(
        start_adapter(lm_base(), rank=4),
        pairs_task,
        ADAPTER_RECIPE.replace(steps=8),
        path,
        replay_steps=4,
        save_path=tmp_path / "mine.eqx",
        progress=False,
    )
    assert run.variant and run.changes == ("adapter rank r 2 -> 4", "steps 12 -> 8")
    assert "adapter rank r 2 -> 4, steps 12 -> 8: training your variant" in capsys.readouterr().out
    mine, info = load_adapter(tmp_path / "mine.eqx", lora.base)
    assert info.recipe == ADAPTER_RECIPE.replace(steps=8) and info.history == run.history
    assert leaves_equal(mine, run.model) and mine.adapters[0]["query"].rank == 4
    scaled = fit_or_replay(
        start_adapter(lm_base(), alpha=4.0),
        pairs_task,
        ADAPTER_RECIPE.replace(steps=4, warmup_steps=1),
        path,
        replay_steps=4,
        progress=False,
    )
    assert scaled.changes[0] == "adapter scale alpha / r 1.0 -> 2.0"


def test_an_adapter_on_another_base_or_start_is_trained_as_a_variant(
    pairs_task, saved_adapter, capsys
):
    path, _, history = saved_adapter
    other_base = fit_or_replay(
        start_adapter(lm_base(seed=1)), pairs_task, ADAPTER_RECIPE, path, replay_steps=4
    )
    assert other_base.variant
    assert other_base.changes == ("the base model's weights (other ones than the saved run's)",)
    # Another draw of R: nothing in the header differs, and the replay's first span finds it.
    other_start = fit_or_replay(
        start_adapter(lm_base(), seed=1), pairs_task, ADAPTER_RECIPE, path, replay_steps=8
    )
    printed = capsys.readouterr().out
    assert other_start.variant and other_start.changes == ()
    assert "your starting weights or data differ" in printed
    assert other_start.history.train_loss != history.train_loss


def test_an_adapter_run_is_not_retraced_from_a_whole_model(pairs_task, saved_adapter):
    path, _, _ = saved_adapter
    with pytest.raises(CheckpointError, match="holds a low-rank adapter.*LoRALanguageModel"):
        retrace(lm_base(), pairs_task, path, steps=4, progress=False)
    run = fit_or_replay(lm_base(), pairs_task, ADAPTER_RECIPE, path, replay_steps=4)
    assert run.variant and run.changes[0] == "model LoRALanguageModel -> LanguageModel"


# -- the chapters, with a changed recipe -------------------------------------------------------

BOOK = ROOT / "book"


def code_cells(chapter: str) -> list[str]:
    """The chapter's code cells before its exercises (their solutions are exercises only)."""
    notebook = json.loads((BOOK / f"{chapter}.ipynb").read_text())
    cells = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("## Exercises"):
            break
        if cell["cell_type"] == "code":
            cells.append(source)
    return cells


def substituted(cells: list[str], old: str, new: str) -> tuple[list[str], int]:
    """The cells with the one line that starts with ``old`` replaced by ``new``, and the index of
    its cell."""
    found = [
        (i, n)
        for i, source in enumerate(cells)
        for n, line in enumerate(source.splitlines())
        if line.startswith(old)
    ]
    assert len(found) == 1, f"{len(found)} lines of the code cells start with {old!r}, not one"
    i, n = found[0]
    lines = cells[i].splitlines()
    lines[n] = new
    return [*cells[:i], "\n".join(lines), *cells[i + 1 :]], i


# Run in a process of its own: a chapter's first cell sets XLA's flags, which must come before
# JAX's first computation, and its figures and state must not leak into the other tests.
RUNNER = """
import contextlib, io, json, sys, time, traceback
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
cells, out = json.loads(open(sys.argv[1]).read()), sys.argv[2]
namespace, printed, seconds = {"__name__": "__main__"}, [], []
for i, source in enumerate(cells):
    buffer, tic = io.StringIO(), time.perf_counter()
    try:
        with contextlib.redirect_stdout(buffer):
            exec(compile(source, f"<code cell {i}>", "exec"), namespace)
    except BaseException:
        printed.append(buffer.getvalue())
        with open(out, "w") as f:
            json.dump({"printed": printed, "failed": i, "error": traceback.format_exc()}, f)
        raise SystemExit(1)
    finally:
        plt.close("all")
    printed.append(buffer.getvalue())
    seconds.append(round(time.perf_counter() - tic, 1))
with open(out, "w") as f:
    json.dump({"printed": printed, "seconds": seconds}, f)
"""


def book_copy(tmp_path: Path) -> Path:
    """A folder laid out as the book's, with a copy of its checkpoints (as `make nbval` runs a
    chapter): a cell that saves a checkpoint writes the copy, never the committed file."""
    book = tmp_path / "book"
    shutil.copytree(BOOK / "checkpoints", book / "checkpoints", symlinks=True)
    for folder in ("benchmarks", "scripts"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    return book


def run_cells(cells: list[str], tmp_path: Path) -> list[str]:
    """Execute the cells in one fresh process, in a copy of the book's folder; each cell's
    printed text."""
    source, out = tmp_path / "cells.json", tmp_path / "printed.json"
    source.write_text(json.dumps(cells))
    environment = {**os.environ, "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(source), str(out)],
        cwd=book_copy(tmp_path),
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = json.loads(out.read_text()) if out.exists() else {}
    if done.returncode or "failed" in result:
        i = result.get("failed")
        shown = cells[i] if i is not None else ""
        raise AssertionError(
            f"code cell {i} failed:\n{shown}\n{result.get('error', done.stderr[-4000:])}"
        )
    print("seconds per code cell:", result["seconds"])  # shown when a test fails or with -s
    return result["printed"]


def run_chapter_with(chapter, old, new, control, tmp_path):
    """Run the chapter's code cells with the line ``old`` changed to ``new``, then the training
    cell once more with the saved recipe (and ``control``, a shorter replay), in one process.

    Returns each cell's printed text, the training cell's index and what its second run printed.
    """
    original = code_cells(chapter)
    cells, training = substituted(original, old, new)
    again, _ = substituted(original[training : training + 1], *control)
    printed = run_cells([*cells, *again], tmp_path)
    # the variant was not saved over the saved runs
    for saved in (BOOK / "checkpoints").glob("*.eqx"):
        copy = tmp_path / "book" / "checkpoints" / saved.name
        if not saved.is_symlink():
            assert copy.read_bytes() == saved.read_bytes(), f"{saved.name} was written"
    return printed[:-1], training, printed[-1]


def test_chapter_8_trains_a_changed_recipe_and_every_later_cell_shows_it(tmp_path):
    printed, training, replayed = run_chapter_with(
        "08_vision_transformer",
        "recipe = VIT_RECIPE  # change it",
        "recipe = VIT_RECIPE.replace(steps=50, warmup_steps=10, learning_rate=0.004)",
        (
            "K = 500  #",
            "K = 25",
        ),
        tmp_path,
    )
    said = printed[training]
    assert said.startswith(
        "steps 9370 -> 50, learning_rate 0.002 -> 0.004, warmup_steps 300 -> 10: "
        "training your variant here, about"
    ), said
    later = "".join(printed[training + 1 :])
    # the later cells print the variant's figures, not the saved run's
    assert "after 50 steps" in later and "your run's training time" in later
    assert "98.81%" not in later
    assert "your run: it ends above the reference's 95.7%: no" in later
    # the control: the unchanged recipe replays the saved run, and says no "variant"
    assert replayed.startswith("steps 1-25 retrace the saved run"), replayed
    assert "variant" not in replayed


def test_chapter_9_trains_a_changed_recipe_and_every_later_cell_shows_it(tmp_path):
    printed, training, replayed = run_chapter_with(
        "09_language_model",
        "recipe = SHAKESPEARE_RECIPE  # change it",
        "recipe = SHAKESPEARE_RECIPE.replace(steps=75, warmup_steps=10, learning_rate=0.004)",
        (
            "K = 50  #",
            "K = 50",
        ),
        tmp_path,
    )
    said = printed[training]
    assert (
        "steps 1000 -> 75, learning_rate 0.002 -> 0.004, warmup_steps 100 -> 10: "
        "training your variant here, about"
    ) in said, said
    later = "".join(printed[training + 1 :])
    # the later cells print the variant's figures, not the saved run's
    assert "step   75: validation loss" in later and "your run took" in later
    assert "step 1000" not in later and "after 75 steps" in later
    assert "your run: still falling at the last evaluation: yes" in later
    # the control: the unchanged recipe replays the saved run, and says no "variant"
    assert "steps 1-50 retrace the saved run" in replayed, replayed
    assert "variant" not in replayed
