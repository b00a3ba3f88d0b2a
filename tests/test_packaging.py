"""pyproject.toml declares what the package imports, and a plain ``pip install`` gives a package
that imports.

The Makefile installs requirements.txt before the package, which would hide a missing dependency;
these tests look at pyproject.toml alone.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "transformer_intro"
# Import names that differ from their distribution's name.
DISTRIBUTIONS = {"PIL": "pillow", "tensorflow_datasets": "tensorflow-datasets"}


def normalise(name: str) -> str:
    """A distribution's name as PEP 503 compares them (case, runs of ``-_.``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalise(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip()).group())


def declared(pyproject: dict) -> tuple[set[str], set[str]]:
    """The distributions in ``dependencies``, and in the extras."""
    project = pyproject["project"]
    core = {requirement_name(r) for r in project["dependencies"]}
    extras = {
        requirement_name(r)
        for group in project.get("optional-dependencies", {}).values()
        for r in group
    }
    return core, extras


def third_party_imports(source: str) -> dict[str, bool]:
    """Top-level names of the third-party modules ``source`` imports; True where the import runs
    when the module is imported (module level), False where it waits inside a function."""
    found: dict[str, bool] = {}

    def visit(node: ast.AST, at_module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = at_module_level and not isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "transformer_intro":
                    found[top] = found.get(top, False) or at_module_level
            visit(child, inside)

    visit(ast.parse(source), True)
    return found


def package_imports() -> dict[str, tuple[bool, list[str]]]:
    """For each third-party import of the package: needed at import time?, and where."""
    imports: dict[str, tuple[bool, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, eager in third_party_imports(path.read_text(encoding="utf8")).items():
            was_eager, where = imports.get(name, (False, []))
            imports[name] = (was_eager or eager, where + [str(path.relative_to(REPO))])
    return imports


def undeclared(imports, core: set[str], extras: set[str]) -> list[str]:
    problems = []
    for name, (eager, where) in sorted(imports.items()):
        distribution = normalise(DISTRIBUTIONS.get(name, name))
        if eager and distribution not in core:
            problems.append(f"{name} (imported at module level in {where}) not in dependencies")
        elif distribution not in core | extras:
            problems.append(f"{name} (imported in {where}) in neither dependencies nor an extra")
    return problems


def test_every_import_is_declared():
    """Module-level imports need a dependency; imports inside functions (the pretrained models,
    figures, TFDS) at least an extra."""
    core, extras = declared(tomllib.loads((REPO / "pyproject.toml").read_text()))
    imports = package_imports()
    assert {"jax", "regex", "gguf", "jinja2", "PIL"} <= set(imports)  # the scan sees them
    assert imports["regex"][0] and not imports["gguf"][0]
    assert undeclared(imports, core, extras) == []
    # Negative controls: without regex, or with gguf in no extra, the check fails.
    assert any(p.startswith("regex") for p in undeclared(imports, core - {"regex"}, extras))
    assert any(p.startswith("gguf") for p in undeclared(imports, core, extras - {"gguf"}))
    # A module-level import declared only in an extra is not enough.
    assert any(p.startswith("regex") for p in undeclared(imports, core - {"regex"}, {"regex"}))


def test_the_import_scan_tells_module_level_from_function_level():
    source = (
        "import numpy as np\nfrom jax import numpy\nfrom . import sibling\nimport os.path\n"
        "try:\n    import yaml\nexcept ImportError:\n    pass\n"
        "def f():\n    import gguf\n    from PIL import Image\n"
        "class C:\n    def g(self):\n        import jinja2\n"
    )
    assert third_party_imports(source) == {
        "numpy": True,
        "jax": True,
        "yaml": True,
        "gguf": False,
        "PIL": False,
        "jinja2": False,
    }


def test_python_floor_matches_the_pins():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == ">=3.11"
    assert pyproject["tool"]["ruff"]["target-version"] == "py311"


def copy_project(destination: Path) -> Path:
    """The files ``pip install .`` reads, copied: building in the work tree would write
    ``build/`` and ``*.egg-info`` there."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(REPO / "src", destination / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, destination / name)
    return destination


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="installs JAX in a new venv; CI runs it")
def test_pip_install_gives_a_package_that_imports(tmp_path):
    """``pip install .`` in a new virtual environment (no system site packages), then
    ``import transformer_intro`` there: a dependency missing from pyproject.toml fails here.

    requirements.txt serves as constraints only (``-c``): it picks the versions that pip
    installs, never adds a package that pyproject.toml does not ask for.
    """
    start = time.monotonic()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    project = copy_project(tmp_path / "project")
    # --no-compile: importing needs no bytecode compiled in advance, and compiling that of JAX
    # and its dependencies took a third of the test's time (on two cores, 42 s against 29 s).
    requirements = ["-c", str(REPO / "requirements.txt"), str(project)]
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-compile", *requirements],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    script = (
        "import sys, transformer_intro, transformer_intro.bpe as bpe\n"
        "print(transformer_intro.__file__)\n"
        "print(bpe.BytePairEncoding.train('abab abab', 258).encode('abab'))\n"
    )
    imported = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, cwd=tmp_path, env={"PATH": ""}
    )
    assert imported.returncode == 0, imported.stderr
    where, ids = imported.stdout.splitlines()
    assert Path(where).is_relative_to(venv), where  # the installed copy, not src/
    assert ids.startswith("[")
    print(f"pip install . and import: {time.monotonic() - start:.0f} s")
