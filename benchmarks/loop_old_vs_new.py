"""Training speed of the one loop, `training.fit`, against the loops it replaced, in one run.

    python benchmarks/loop_old_vs_new.py [--old 75c6773] [--rounds 3] [--steps 200]

The old package is taken from git (``git archive REV src``) into a temporary folder. Each
contender trains in a process of its own (the two packages share a name), and the contenders take
turns, round after round, so that other load on the machine hits both alike:

* the ViT (the "default" configuration, chapter 8's batch of 128 and max shift 2) on random
  MNIST-shaped digits: the old ``train.fit`` (one epoch of ``--steps`` steps timed, after an epoch
  that compiles) against ``training.fit`` (the second ``--steps`` steps of ``2 * --steps``);
* the language model (chapter 9's configuration and batch) on random symbols: the old
  ``train_language_model`` against ``training.fit``, the second half of ``2 * --steps`` steps.

Both loops count training seconds without evaluation. Prints images (or steps) per second and the
new loop's speed over the old one's; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# Each snippet prints one number: the timed steps' rate. STEPS is filled in.
VIT_OLD = """
import jax, numpy as np
from transformer_intro import VisionTransformer
from transformer_intro.train import TrainConfig, fit
S, B = STEPS, 128
rng = np.random.default_rng(0)
data = (rng.integers(0, 256, (S * B, 28, 28), dtype=np.uint8), rng.integers(0, 10, S * B))
model = VisionTransformer("default", key=jax.random.PRNGKey(0))
config = TrainConfig(epochs=2, batch_size=B, max_shift=2)
_, history = fit(model, data, None, config, progress=False)
print(S * B / (history.train_seconds[1] - history.train_seconds[0]))
"""

VIT_NEW = """
import jax, numpy as np
from transformer_intro import VisionTransformer
from transformer_intro.tasks import VIT_RECIPE, ImageClassification
from transformer_intro.training import fit
S, B = STEPS, 128
rng = np.random.default_rng(0)
data = (rng.integers(0, 256, (S * B, 28, 28), dtype=np.uint8), rng.integers(0, 10, S * B))
task = ImageClassification(data, max_shift=2)
model = VisionTransformer("default", key=jax.random.PRNGKey(0))
_, history = fit(model, task, VIT_RECIPE.replace(steps=2 * S, batch_size=B), progress=False)
print(S * B / (history.seconds[-1] - history.seconds[history.step.index(S)]))
"""

LM_OLD = """
import jax, numpy as np
from transformer_intro.language_model import (
    SHAKESPEARE_CONFIG, LanguageModel, LMRecipe, train_language_model)
S = STEPS
rng = np.random.default_rng(0)
ids = rng.integers(0, SHAKESPEARE_CONFIG.vocab_size, 200_000)
windows = ids[: 4 * (SHAKESPEARE_CONFIG.window + 1)].reshape(4, -1)
model = LanguageModel(SHAKESPEARE_CONFIG, key=jax.random.PRNGKey(0))
recipe = LMRecipe(steps=2 * S, batch_size=64)
_, history = train_language_model(model, ids, windows, recipe, eval_every=S, progress=False)
print(S / (history.seconds[1] - history.seconds[0]))
"""

LM_NEW = """
import jax, numpy as np
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG, LanguageModel
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction
from transformer_intro.training import fit
S = STEPS
rng = np.random.default_rng(0)
ids = rng.integers(0, SHAKESPEARE_CONFIG.vocab_size, 200_000)
task = NextSymbolPrediction(ids, window=SHAKESPEARE_CONFIG.window)
model = LanguageModel(SHAKESPEARE_CONFIG, key=jax.random.PRNGKey(0))
_, history = fit(model, task, SHAKESPEARE_RECIPE.replace(steps=2 * S), progress=False)
print(S / (history.seconds[-1] - history.seconds[history.step.index(S)]))
"""


def old_source(rev: str, into: Path) -> Path:
    """``src/`` of commit ``rev``, unpacked below ``into``."""
    archive = into / "old.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", ROOT, "archive", rev, "src"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def rate(snippet: str, src: Path, steps: int) -> float:
    """Run one contender in a fresh process on the package in ``src``; its printed rate."""
    env = dict(os.environ, PYTHONPATH=str(src))
    code = snippet.replace("STEPS", str(steps))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"a contender failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", default="75c6773", help="the commit with the old loops")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="timed steps (a multiple of 25)")
    args = parser.parse_args()
    if args.steps % 25:
        parser.error("--steps must be a multiple of 25 (the loops' steps per compiled call)")
    with tempfile.TemporaryDirectory() as folder:
        old, new = old_source(args.old, Path(folder)), ROOT / "src"
        contenders = {
            ("ViT", "images/s", "old"): (VIT_OLD, old),
            ("ViT", "images/s", "new"): (VIT_NEW, new),
            ("LM", "steps/s", "old"): (LM_OLD, old),
            ("LM", "steps/s", "new"): (LM_NEW, new),
        }
        rates = {name: [] for name in contenders}
        for round_ in range(args.rounds):
            for name, (snippet, src) in contenders.items():
                rates[name].append(rate(snippet, src, args.steps))
            print(
                f"round {round_ + 1}: "
                + ", ".join(f"{m} {loop} {v[-1]:,.1f} {u}" for (m, u, loop), v in rates.items()),
                flush=True,
            )
    for model, unit in (("ViT", "images/s"), ("LM", "steps/s")):
        old_rate = np.median(rates[(model, unit, "old")])
        new_rate = np.median(rates[(model, unit, "new")])
        print(
            f"{model}: old {old_rate:,.1f} {unit}, new {new_rate:,.1f} {unit} "
            f"(medians of {args.rounds}); new / old = {new_rate / old_rate:.3f}"
        )


if __name__ == "__main__":
    main()
