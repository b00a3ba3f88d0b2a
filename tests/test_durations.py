"""scripts/durations.py: the recorded durations and the longest-first order make hands out."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("durations", ROOT / "scripts" / "durations.py")
durations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(durations)

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="one" file="tests/test_config.py" time="1.5" />
<testcase classname="tests.test_a" name="two" file="tests/test_config.py" time="2.0" />
<testcase classname="x" name="Cell 3"
 file=".nbval-run-e/09_language_model/book/09_language_model.ipynb" time="7.25" />
</testsuite></testsuites>"""


def test_a_report_is_summed_per_file_and_a_notebooks_copy_is_the_committed_chapter(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(REPORT)
    assert durations.per_file_seconds([report]) == {
        "tests/test_config.py": 3.5,
        "book/09_language_model.ipynb": 7.25,
    }


def test_a_report_without_file_attributes_is_refused_with_the_option_that_writes_them(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(REPORT.replace('file="tests/test_config.py" ', ""))
    with pytest.raises(SystemExit, match="junit_family=xunit1"):
        durations.per_file_seconds([report])


def test_a_file_whose_tests_were_all_skipped_keeps_its_recorded_duration(tmp_path, monkeypatch):
    recorded = tmp_path / "durations.json"
    recorded.write_text(
        json.dumps(
            {
                "tests/browser/test_layout.py": 103.1,
                "tests/browser/test_quiz.py": 41.0,
                "tests/test_config.py": 9.0,
            }
        )
    )
    monkeypatch.setattr(durations, "DURATIONS", recorded)
    report = tmp_path / "r.xml"
    report.write_text(
        """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="a" name="one" file="tests/browser/test_layout.py" time="0.001">
 <skipped message="browser test: pass --run-browser" /></testcase>
<testcase classname="a" name="two" file="tests/browser/test_layout.py" time="0.000">
 <skipped message="browser test: pass --run-browser" /></testcase>
<testcase classname="b" name="one" file="tests/browser/test_pages.py" time="0.002">
 <skipped message="browser test: pass --run-browser" /></testcase>
<testcase classname="c" name="one" file="tests/browser/test_quiz.py" time="0.0" />
<testcase classname="d" name="one" file="tests/test_config.py" time="2.5" />
<testcase classname="d" name="two" file="tests/test_config.py" time="0.0">
 <skipped message="needs a GPU" /></testcase>
</testsuite></testsuites>"""
    )
    durations.record([report])
    assert json.loads(recorded.read_text()) == {
        "tests/browser/test_layout.py": 103.1,  # all skipped: kept
        "tests/browser/test_quiz.py": 41.0,  # ran, but took no time: kept
        "tests/test_config.py": 2.5,  # the control: measured, so replaced
    }  # and test_pages.py, all skipped and never recorded, stays unrecorded
    assert not list(tmp_path.glob(".durations.json.*")), "the writer left its temporary file"


def test_order_is_longest_first_with_unrecorded_files_ahead(tmp_path, monkeypatch):
    recorded = tmp_path / "durations.json"
    recorded.write_text(json.dumps({"b": 1.0, "c": 30.0, "a": 5.0}))
    monkeypatch.setattr(durations, "DURATIONS", recorded)
    assert durations.order(["a", "new", "b", "c"]) == ["new", "c", "a", "b"]


def test_the_makefile_hands_out_every_test_file_and_chapter_once():
    listed = subprocess.run(
        ["make", "-n", "--no-print-directory", "unit-and-nbval"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    items = [w for w in listed.split() if w.endswith((".py", ".ipynb")) and "/" in w]
    items = [durations.repository_path(w) for w in items if w.startswith(("tests/", ".nbval"))]
    # Make's wildcard skips names beginning with a dot (book/.bench_*.ipynb, written while a
    # benchmark runs) and pathlib's glob does not.
    expected = sorted(
        p.relative_to(ROOT).as_posix()
        for pattern in ("tests/test_*.py", "tests/*/test_*.py", "book/*.ipynb")
        for p in ROOT.glob(pattern)
        if not p.name.startswith(".")
    )
    pytest_items = [i for i in items if i in expected]
    assert sorted(set(pytest_items)) == expected
    recorded = json.loads((ROOT / "tests" / "durations.json").read_text())
    known = [i for i in dict.fromkeys(pytest_items) if i in recorded]
    assert [recorded[i] for i in known] == sorted((recorded[i] for i in known), reverse=True)
