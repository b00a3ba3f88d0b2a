"""What each change since 2017 buys the character language model, on one time budget.

Chapter 9's task (Shakespeare, held-out plays, nats per character on the fixed evaluation windows
of ``NextSymbolPrediction.evaluate``) and model, trained by ``fit`` once per variant: the chapter's
model and recipe, each modern change alone (RMSNorm, SwiGLU, grouped-query attention, QK-norm,
rotary base 100,000 with the half layout, Muon), all of them together, the combination with a
few more changes, and that with every block starting as the identity. Every run fills the same
wall-clock budget of training, compilation included (evaluation is off the clock, as in ``fit``).

How a run fills the time: ``fixed_time.py``, beside this script, fits the cosine schedule's number
of steps to the seconds as the run goes; each run records its re-plans.

Writes ``benchmarks/results/lm_ablation.json`` (per run: the model's configuration, the recipe,
steps, seconds, final held-out nats/char, held-out and training loss against seconds, the load
average before and after) with the machine it ran on. Run it at normal priority; the load average
tells the reader whether the machine was shared.

    python benchmarks/lm_ablation.py [--seconds 300] [--only baseline muon] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import jax
from fixed_time import load_average, train_for_seconds  # beside this script
from overrides import with_changes
from report import machine, write_json

from transformer_intro import LanguageModel, Vocabulary, count_parameters
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG, LMConfig
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction, bits
from transformer_intro.training import Recipe

RESULTS = Path(__file__).resolve().parent / "results" / "lm_ablation.json"
EVALUATIONS = 8  # held-out evaluations per run (off the clock), for the loss-vs-seconds curve

# Each variant: a label, the changes to chapter 9's model configuration, the changes to its recipe.
SWIGLU = {"mlp": "gated", "activation": "silu", "mlp_bias": False, "mlp_hidden_dim": 344}
# 344 is 2/3 of 512 (rounded up to a multiple of 8): three matrices then hold as many numbers
# as the plain MLP's two.
MODERN = {
    "norm": "rms",
    **SWIGLU,
    "num_kv_heads": 2,
    "qk_norm": True,
    "rotary_base": 100_000.0,
    "rotary_layout": "half",
}
MUON = {"matrix_optimiser": "muon", "muon_learning_rate": 0.02}
VARIANTS = {
    "baseline": ("chapter 9's model", {}, {}),
    "rmsnorm": ("RMSNorm", {"norm": "rms"}, {}),
    "swiglu": ("SwiGLU", SWIGLU, {}),
    "gqa": ("grouped-query attention, 2 key-value heads", {"num_kv_heads": 2}, {}),
    "qk_norm": ("QK-norm", {"qk_norm": True}, {}),
    "rotary": (
        "rotary base 100,000, half layout",
        {"rotary_base": 100_000.0, "rotary_layout": "half"},
        {},
    ),
    "muon": ("Muon", {}, MUON),
    "combined": ("all together", MODERN, MUON),
    # A step further: the squared ReLU of So et al. (2021) instead of SwiGLU, and six blocks.
    "combined_plus": (
        "all together, ReLU² MLP instead of SwiGLU, 6 blocks",
        {
            **MODERN,
            "mlp": "mlp",
            "activation": "relu2",
            "mlp_bias": True,
            "mlp_hidden_dim": 512,
            "num_blocks": 6,
        },
        MUON,
    ),
}
# The last recipe with every block starting as the identity (the last linear map of each branch
# at zero) and the cosine decaying to zero: the same program per step, other initial values.
VARIANTS["combined_identity"] = (
    "the last, identity start, cosine to zero",
    {**VARIANTS["combined_plus"][1], "zero_init_residual": True},
    {**MUON, "final_learning_rate": 0.0},
)


def run(name: str, config: LMConfig, recipe: Recipe, task, seconds: float) -> dict:
    """Train one variant for ``seconds`` (compilation included), re-planning T."""
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    trained, run = train_for_seconds(
        model, recipe, task, seconds, lambda m: _evaluate(task, m), evaluations=EVALUATIONS
    )
    final = run["held_out"][-1]["nats_per_char"]
    return {
        "name": name,
        "label": VARIANTS[name][0],
        "config": json.loads(config.to_json()),
        "parameters": count_parameters(trained),
        **run,
        "recipe": json.loads(run["recipe"].to_json()),
        "nats_per_char": final,
        "bits_per_char": bits(final),
    }


def _evaluate(task, model) -> dict:
    return {"nats_per_char": task.evaluate(model)["nats_per_symbol"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=300.0, help="the budget of every run")
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="run only these")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--append", action="store_true", help="add the runs to those already in --out"
    )
    args = parser.parse_args()
    names = args.only or list(VARIANTS)
    train_text, validation_text = load_shakespeare("train"), load_shakespeare("validation")
    vocabulary = Vocabulary.from_text(train_text)
    task = NextSymbolPrediction(
        vocabulary.encode(train_text),
        window=SHAKESPEARE_CONFIG.window,
        validation_ids=vocabulary.encode(validation_text),
    )
    results = {
        "budget_seconds": args.seconds,
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": load_average(),
        "task": "chapter 9: Shakespeare, held-out plays, nats per character",
        "runs": [],
    }
    if args.append and args.out.exists():
        earlier = json.loads(args.out.read_text())
        if earlier["budget_seconds"] != args.seconds:
            raise SystemExit(f"{args.out} holds runs of {earlier['budget_seconds']} s, not these")
        results["runs"] = [r for r in earlier["runs"] if r["name"] not in names]
        results["earlier_invocations"] = earlier.get("earlier_invocations", []) + [
            {k: earlier[k] for k in ("date", "machine", "load_average_start") if k in earlier}
        ]
    print(json.dumps(results["machine"]), flush=True)
    for name in names:
        _, config_changes, recipe_changes = VARIANTS[name]
        config = with_changes(SHAKESPEARE_CONFIG, {"vocab_size": len(vocabulary), **config_changes})
        recipe = SHAKESPEARE_RECIPE.replace(**recipe_changes)
        try:
            row = run(name, config, recipe, task, args.seconds)
        except Exception as error:  # report it and go on with the other variants
            print(f"{name}: failed: {error!r}", flush=True)
            continue
        results["runs"].append(row)
        results["load_average_end"] = load_average()
        write_json(args.out, results)  # after every run, atomically
        print(
            f"{name:14s} {row['steps']:5d} steps {row['seconds']:6.1f} s "
            f"{row['nats_per_char']:.3f} nats/char ({row['bits_per_char']:.3f} bits/char)  "
            f"load {row['load_average_before']} -> {row['load_average_after']}",
            flush=True,
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
