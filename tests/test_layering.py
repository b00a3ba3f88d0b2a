"""The package's layers, read from its imports: a lower layer never imports a higher one.

Layers, bottom to top: the building blocks (attention, MLP, normalisation, positions,
tokenisers, precision, datasets), the transformer block, the relations of chapter 11, the models,
parallel placement (which knows no model), the tasks, then training, and at the top the checked
exercises of the chapters (whose references use every layer below, training's gradients among
them).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_intro"
LAYERS = {
    "attention": 0, "mlp": 0, "normalisation": 0, "positions": 0, "tokenisers": 0,
    "precision": 0, "datasets": 0, "bpe": 0,
    "explore": 0,  # figures: draws arrays it is given, imports nothing of the package
    "block": 1,
    "relations": 2,
    "models": 3,
    "parallel": 4,
    "pretrained": 4,  # pretrained models: configurations of the models, and converters
    "adapters": 4,  # low-rank adapters wrapped around a model's projections
    "tasks": 5,
    "training": 5,  # tasks name their recipes; training's multi-process demo trains a task
    "exercises": 6,  # the chapters' checked exercises: references from every layer below
}  # fmt: skip


def layer_of(module: str) -> int | None:
    """The layer of ``transformer_intro.<first part>...``; None for the package itself."""
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 and parts[0] == "transformer_intro" else None


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
        own = layer_of("transformer_intro." + path.relative_to(root).with_suffix("").parts[0])
        for target in imports(path, root):
            theirs = layer_of(target)
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
    found = violations(tmp_path)
    assert found == ["block.py imports transformer_intro.training",
                     "models/vit.py imports transformer_intro.tasks"]  # fmt: skip


def test_parallel_imports_no_model():
    assert not [t for t in imports(PACKAGE / "parallel.py") if "models" in t]


@pytest.mark.parametrize("heavy", ["optax", "tqdm"])
def test_importing_the_package_does_not_import(heavy):
    code = f"import sys, transformer_intro; print({heavy!r} in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


# The modules of the models, tasks, training and placement layers (the building blocks' own
# modules are another matter).
DECLARED = [
    "block.py", "parallel.py", "tasks.py", "datasets/mnist.py", "relations/recurrence.py",
    "models/__init__.py", "models/vit.py", "models/language_model.py",
    "models/encoder_decoder.py", "training/__init__.py", "training/checkpoints.py",
    "training/distributed.py", "training/history.py", "training/loop.py", "training/recipe.py",
    "training/step.py",
]  # fmt: skip


def test_public_modules_declare_all():
    for path in (PACKAGE / name for name in DECLARED):
        tree = ast.parse(path.read_text())
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}  # fmt: skip
        assert "__all__" in names, f"{path.relative_to(PACKAGE)} has no __all__"
