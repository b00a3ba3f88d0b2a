"""The package's layers, read from its imports: a lower layer never imports a higher one.

Layers, bottom to top: the building blocks, the transformer block, the relations of chapter 11,
the models, then parallel placement (which knows no model), the pretrained models and the
adapters, then training (the loop, recipes and checkpoints, for any model and any task), the
tasks (which name the chapters' recipes) beside the export of trained weights for the book's
pages (it reads checkpoints), and at the top the command-line demonstrations
(a model, a task and training put together) and the checked exercises of the chapters (whose
references use every layer below, training's gradients among them).

The building blocks are ordered among themselves too (BUILDING_BLOCKS, bottom first): each may
import only those before it, so no cycle can form among them either.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_intro"
# The bottom layer, bottom first: a module may import only the modules before it.
BUILDING_BLOCKS = (
    "files",  # files written whole or not at all: a temporary file, renamed into place
    "config",  # configurations as JSON, and the registry of the models they build
    "parameters",  # counting a module's parameters
    "precision",
    "activations",  # the nonlinearities a configuration names
    "xla_flags",  # quick compilation, and the loop emitters where XLA has them
    "quantisation",  # weights in GGUF's blocks, and their products (a C++ kernel via jax.ffi)
    "normalisation",
    "positions",
    "mlp",
    "attention",  # QK-norm is a normalisation; rotary positions
    "flash_attention",  # attention in tiles: the online softmax and its backward pass
    "bpe",
    "tokenisers",  # re-exports bpe
    "datasets",  # the dates' vocabulary is a tokeniser's Vocabulary
    "roofline",  # a machine's two roofs measured, and the FLOPs and bytes of a block's parts
    "explore",  # figures: draws arrays it is given, imports nothing of the package
)
LAYERS = {
    **dict.fromkeys(BUILDING_BLOCKS, 0),
    "block": 1,
    "relations": 2,
    "models": 3,
    "parallel": 4,
    "pretrained": 4,  # pretrained models: configurations of the models, and converters
    "adapters": 4,  # low-rank adapters wrapped around a model's projections
    "training": 5,  # one loop for any model and task; the task is duck-typed, never imported
    "tasks": 6,  # the chapters' tasks, and their recipes (training's Recipe)
    "export": 6,  # trained models' weights for the book's pages: reads checkpoints
    "interpretability": 6,  # ablation, patching, the logit lens, probes: on the models
    "verifier_tasks": 6,  # tasks that learn from a verifier: GRPO's sampled groups, DPO's pairs
    "demos": 7,  # command-line demonstrations: a model, a task and training together
    "exercises": 7,  # the chapters' checked exercises: references from every layer below
}  # fmt: skip


def rank_of(module: str) -> tuple[int, int] | None:
    """(layer, place among the building blocks) of ``transformer_intro.<first part>...``.

    None for the package itself; the place is 0 outside the bottom layer.
    """
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "transformer_intro":
        return None
    top = parts[1]
    return LAYERS[top], BUILDING_BLOCKS.index(top) if top in BUILDING_BLOCKS else 0


def imports(path: Path, root: Path = PACKAGE) -> list[str]:
    """Every transformer_intro module ``path`` imports, relative imports resolved."""
    module = "transformer_intro." + ".".join(path.relative_to(root).with_suffix("").parts)
    package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if not node.level and not target.startswith("transformer_intro"):
                continue
            names = [f"{target}.{a.name}" for a in node.names] if not node.module else [target]
            found += names
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("transformer_intro")]
    return found


def violations(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.parent == root and path.name == "__init__.py":
            continue  # the package's front door re-exports from every layer below it
        own = rank_of("transformer_intro." + path.relative_to(root).with_suffix("").parts[0])
        for target in imports(path, root):
            theirs = rank_of(target)
            if theirs is not None and own is not None and theirs > own:
                out.append(f"{path.relative_to(root)} imports {target}")
    return out


def test_no_layer_imports_a_higher_one():
    assert violations() == []


def test_every_module_is_in_a_layer():
    tops = {p.relative_to(PACKAGE).with_suffix("").parts[0] for p in PACKAGE.rglob("*.py")}
    assert tops - {"__init__"} <= set(LAYERS)


def test_the_check_can_fail(tmp_path):
    (tmp_path / "block.py").write_text("from .training import fit\nfrom .attention import x\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "vit.py").write_text("from ..tasks import VIT_RECIPE\n")
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "loop.py").write_text("from .. import tasks\nfrom ..models import x\n")
    found = violations(tmp_path)
    assert found == ["block.py imports transformer_intro.training",
                     "models/vit.py imports transformer_intro.tasks",
                     "training/loop.py imports transformer_intro.tasks"]  # fmt: skip


def test_the_building_blocks_import_only_those_below_them(tmp_path):
    # Within the bottom layer: positions may not import attention, which imports positions.
    (tmp_path / "positions.py").write_text("from .attention import causal_mask\n")
    (tmp_path / "attention.py").write_text(
        "from .positions import x\nfrom .normalisation import y\n"
    )
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "dates.py").write_text(
        "from ..tokenisers import V\nfrom . import mnist\n"
    )
    (tmp_path / "config.py").write_text("from .parameters import count_parameters\n")
    found = violations(tmp_path)
    assert found == ["config.py imports transformer_intro.parameters",
                     "positions.py imports transformer_intro.attention"]  # fmt: skip


def test_every_building_block_is_placed_once():
    assert len(set(BUILDING_BLOCKS)) == len(BUILDING_BLOCKS)
    assert all(LAYERS[name] == 0 for name in BUILDING_BLOCKS)
    assert {name for name, layer in LAYERS.items() if layer == 0} == set(BUILDING_BLOCKS)


# The layers and the models multiply by a matrix in blocks as by an array: the block format and
# the attention that multiplies by its output matrix live beside it (models/quantised.py).
FORMAT_FREE = [
    "normalisation.py", "positions.py", "mlp.py", "attention.py", "flash_attention.py",
    "block.py", "models/vit.py", "models/language_model.py", "models/encoder_decoder.py",
    "models/generation.py", "models/kv_cache.py",
]  # fmt: skip


def test_the_layers_and_models_know_no_block_format():
    found = {name: [t for t in imports(PACKAGE / name) if "quantis" in t] for name in FORMAT_FREE}
    assert {name: targets for name, targets in found.items() if targets} == {}
    # control: the module beside the format is seen importing it
    assert "transformer_intro.quantisation" in imports(PACKAGE / "models/quantised.py")


def test_parallel_imports_no_model():
    assert not [t for t in imports(PACKAGE / "parallel.py") if "models" in t]


@pytest.mark.parametrize("heavy", ["optax", "tqdm"])
def test_importing_the_package_does_not_import(heavy):
    code = f"import sys, transformer_intro; print({heavy!r} in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


# The modules of the models, tasks, training, placement and demonstration layers, and the
# building blocks that configure and count them (the others are another matter).
DECLARED = [
    "block.py", "parallel.py", "tasks.py", "datasets/mnist.py", "relations/recurrence.py",
    "models/__init__.py", "models/vit.py", "models/language_model.py",
    "models/encoder_decoder.py", "models/quantised.py", "training/__init__.py",
    "training/checkpoints.py",
    "training/history.py", "training/loop.py", "training/recipe.py",
    "training/step.py", "config.py", "parameters.py", "datasets/synthetic.py",
    "demos/multi_process.py", "pretrained/__init__.py", "pretrained/gguf.py",
    "pretrained/gpt2.py", "pretrained/llama.py", "pretrained/smollm2.py",
    "pretrained/state_dict.py", "pretrained/tokeniser.py", "files.py",
]  # fmt: skip


def test_public_modules_declare_all():
    for path in (PACKAGE / name for name in DECLARED):
        tree = ast.parse(path.read_text())
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}  # fmt: skip
        assert "__all__" in names, f"{path.relative_to(PACKAGE)} has no __all__"


def test_no_library_module_imports_another_modules_private_name():
    # The exercises' checks may reach into internals to name a reader's mistake; nothing else.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "exercises":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("transformer_intro")
            ):
                private = [a.name for a in node.names if a.name.startswith("_")]
                found += [f"{path.relative_to(PACKAGE)} imports {name}" for name in private]
    assert found == []
