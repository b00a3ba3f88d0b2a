"""The test files' recorded durations, and the longest-first order `make` hands files out in.

pytest-xdist with ``--dist loadfile`` gives each process whole files in the order it is given
them; handed out longest first, neither process is left alone with a long file at the end. The
durations are those of the last full run, summed per file from pytest's JUnit XML reports
(``make unit``, ``make nbval``, ``make unit-and-nbval`` and ``make browser-checks`` write them to
``_build/junit/``), and kept in ``tests/durations.json``:

    python3 scripts/durations.py record _build/junit/*.xml   # after a full `make test`
    python3 scripts/durations.py order FILE...              # what the Makefile calls

A file whose test cases were all skipped (the browser tests, when Chromium is absent), or took
no time, keeps its earlier duration: a skipped run says nothing about how long the file takes.

``order`` prints the files longest first; files with no recorded duration (new ones) come first,
in the order given, since nothing says they are short. Only the standard library is used, so that
`make` can call it before the virtual environment exists.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
NBVAL_COPY = ".nbval-run"  # notebooks run from .nbval-run*/<chapter>/book/<chapter>.ipynb


def repository_path(file: str) -> str:
    """The committed path of a test item's file (a notebook's copy maps to book/<name>)."""
    path = Path(file)
    if path.suffix == ".ipynb" and any(p.startswith(NBVAL_COPY) for p in path.parts):
        return f"book/{path.name}"
    if path.is_absolute():
        path = path.relative_to(ROOT)
    return path.as_posix()


def per_file_seconds(reports: list[Path]) -> dict[str, float]:
    """Seconds per file, summed over the test cases of pytest's JUnit XML reports (xunit1).

    Skipped test cases are left out, so a file whose cases were all skipped is absent.
    """
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            file = case.get("file")
            if file is None:
                raise SystemExit(
                    f"{report}: a test case has no file attribute; write the report with "
                    "`-o junit_family=xunit1`, as the Makefile does"
                )
            if case.find("skipped") is not None:
                continue
            seconds[repository_path(file)] += float(case.get("time", 0.0))
    return dict(seconds)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with the package's writer, ``transformer_intro.files``.

    The module is loaded from its file, not imported through the package, whose ``__init__``
    imports JAX: it uses only the standard library, so `make` may run this with any Python 3.
    """
    spec = importlib.util.spec_from_file_location(
        "transformer_intro_files", ROOT / "src" / "transformer_intro" / "files.py"
    )
    files = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(files)
    files.write_atomically(path, text)


def record(reports: list[Path]) -> None:
    """Merge the reports' per-file durations into ``tests/durations.json``."""
    if not reports:
        raise SystemExit("no reports given: run `make test` first (it writes _build/junit/*.xml)")
    measured = per_file_seconds(reports)
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    # Files the reports do not cover (another target's) keep their earlier duration, and so do
    # files whose cases took no time: a run of skips would otherwise record them as free.
    measured = {f: s for f, s in measured.items() if round(s, 1) > 0 or f not in known}
    merged = {**known, **{f: round(s, 1) for f, s in measured.items()}}
    merged = {f: s for f, s in merged.items() if (ROOT / f).exists()}
    ordered = dict(sorted(merged.items(), key=lambda item: (-item[1], item[0])))
    write_atomically(DURATIONS, json.dumps(ordered, indent=1) + "\n")
    print(f"{DURATIONS}: {len(measured)} files measured, {len(ordered)} kept")


def order(files: list[str]) -> list[str]:
    """``files`` longest first by recorded duration; unrecorded files first, as given."""
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    new = [f for f in files if f not in known]
    recorded = sorted((f for f in files if f in known), key=lambda f: -known[f])
    return new + recorded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("record").add_argument("reports", nargs="*", type=Path)
    commands.add_parser("order").add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.command == "record":
        record(args.reports)
    else:
        sys.stdout.write(" ".join(order(args.files)) + "\n")


if __name__ == "__main__":
    main()
