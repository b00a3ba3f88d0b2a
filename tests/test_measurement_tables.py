"""The measurements appendix's tables for chapter 16 and its records are the committed result
files, as rounded.

A rerun of ``benchmarks/quantised_matvec.py``, ``benchmarks/pretrained_speed.py`` or
``benchmarks/records.py`` that rewrites its file without the table (or the reverse) fails here.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPENDIX = (ROOT / "book" / "appendix_measurements.md").read_text(encoding="utf8")


def table_after(heading: str) -> list[list[str]]:
    """The rows of the first Markdown table after ``heading``, cells stripped, header skipped."""
    text = APPENDIX[APPENDIX.index(heading) :]
    lines = text[text.index("\n|") + 1 :].splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[2:]


def result(name: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / name).read_text())


def test_the_quantised_products_table_is_the_committed_run():
    layouts = result("quantised_matvec.json")["layouts"]
    rows = table_after("## Products with 8-bit weights on the CPU")
    assert [row[0] for row in rows] == list(layouts)
    for name, weights, ms, ratio in rows:
        figures = layouts[name]
        assert weights == f"{figures['weights_mb']:.1f}", name
        assert ms == f"{figures['ms_per_step']:.1f}", name
        assert ratio == f"{figures['relative_to_float32']:.2f}", name


def test_the_llama_cpp_table_is_the_committed_run():
    runs = result("pretrained_speed.json")["runs"]
    rows = {row[0]: row[1:] for row in table_after("**llama.cpp on the same file.**")}
    order = [
        f"{name}, {threads} thread(s)" for name in ("jax", "torch", "llama") for threads in (1, 2)
    ]
    assert rows["prefill, tokens/s"] == [f"{runs[k]['prefill_tokens_per_s']:.0f}" for k in order]
    assert rows["decoding, tokens/s"] == [f"{runs[k]['decode_tokens_per_s']:.1f}" for k in order]
    assert rows["peak memory, MiB"] == [f"{runs[k]['peak_mib']:,.0f}" for k in order]


BLOCKS_ROWS = {  # the table's rows: the benchmark's names, in order
    "jax": "book's code, float32",
    "jax-blocks": "book's code, blocks",
    "jax-blocks-q8": "blocks, Q8_0 vectors",
    "jax-blocks-scan": "blocks, scanned",
    "jax-blocks-q8-scan": "blocks, Q8_0 vectors, scanned",
    "torch": "transformers",
    "llama": "llama.cpp",
}


def test_the_blocks_table_is_the_committed_run():
    measured = result("pretrained_speed_blocks.json")
    runs = measured["runs"]
    heading = "## SmolLM2 with its weights kept in blocks"
    expected = []
    for name, label in BLOCKS_ROWS.items():
        for threads in (1, 2):
            r = runs[f"{name}, {threads} thread(s)"]
            expected.append(
                [
                    label,
                    str(threads),
                    f"{r['prefill_tokens_per_s']:.0f}",
                    f"{r['decode_tokens_per_s']:.1f}",
                    f"{r['peak_after_loading_mib']:,.0f}",
                    f"{r['peak_mib']:,.0f}",
                ]
            )
    assert table_after(heading) == expected
    two = {name: runs[f"{name}, 2 thread(s)"] for name in BLOCKS_ROWS}
    section = re.sub(r"\s+", " ", APPENDIX[APPENDIX.index(heading) :])

    def decode_ratio(a, b):
        return two[a]["decode_tokens_per_s"] / two[b]["decode_tokens_per_s"]

    assert f"decode {decode_ratio('jax-blocks', 'jax'):.2f} times as fast as the float32" in section
    assert f"then {decode_ratio('jax-blocks-q8', 'jax'):.2f} times as fast as float32's" in section
    assert f"{decode_ratio('jax-blocks-q8', 'llama'):.2f} times llama.cpp's speed" in section
    prefill = [two[n]["prefill_tokens_per_s"] for n in ("jax-blocks-q8", "jax")]
    assert "about as fast as in float32" in section and abs(prefill[0] / prefill[1] - 1) < 0.1
    blocks_peak, float_peak = (two[n]["peak_mib"] for n in ("jax-blocks", "jax"))
    assert f"peak of {blocks_peak:,.0f} MiB against {float_peak:,.0f}" in section
    agreed = measured["tokens_equal_to_book_before_first_difference"]
    assert f"({agreed['jax-blocks']} of 64)" in section
    assert f"agree for the first {agreed['jax-blocks-q8']} of 64" in section
    assert f"rounds the vectors, for the first {agreed['llama']})" in section
    assert f"peaks at {two['jax-blocks']['peak_after_loading_mib']:.0f} MiB" in section
    assert f"peaks at {two['llama']['peak_mib']:.0f} MiB" in section
    scanned = [two[n] for n in ("jax-blocks-scan", "jax-blocks-q8-scan")]
    assert (
        "the peak is then {:,.0f} MiB on two cores ({:,.0f} with Q8_0 vectors)".format(
            *(r["peak_mib"] for r in scanned)
        )
        in section
    )
    assert (
        "decoding runs at {:.1f} and {:.1f} tokens/s".format(
            *(r["decode_tokens_per_s"] for r in scanned)
        )
        in section
    )
    scanned_agree = [agreed[n] for n in ("jax-blocks-scan", "jax-blocks-q8-scan")]
    assert "({} and {} of 64 equal to the float32 model's)".format(*scanned_agree) in section
    for name in ("jax-blocks", "jax-blocks-q8"):  # "the greedy tokens are the unscanned model's"
        for threads in (1, 2):
            unscanned = runs[f"{name}, {threads} thread(s)"]["tokens"]
            assert runs[f"{name}-scan, {threads} thread(s)"]["tokens"] == unscanned
    fastest = max(two, key=lambda n: two[n]["prefill_tokens_per_s"])
    assert fastest == "torch" and "transformers fills the prompt fastest" in section


def test_the_prose_ratios_follow_from_the_committed_runs():
    runs = result("pretrained_speed.json")["runs"]
    speedup = (
        runs["llama, 2 thread(s)"]["decode_tokens_per_s"]
        / runs["jax, 2 thread(s)"]["decode_tokens_per_s"]
    )
    assert f"llama.cpp decodes {speedup:.1f} times as fast as the book's code" in re.sub(
        r"\s+", " ", APPENDIX
    )
    agreed = result("pretrained_speed.json")["tokens_equal_to_book_before_first_difference"]
    assert f"for the first {agreed['llama']} of 64" in re.sub(r"\s+", " ", APPENDIX)


def test_chapter_16_quotes_the_committed_runs():
    cells = json.loads((ROOT / "book" / "16_quantisation_and_adapters.ipynb").read_text())["cells"]
    text = re.sub(
        r"\s+", " ", " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    )
    ratio = {
        k: v["relative_to_float32"] for k, v in result("quantised_matvec.json")["layouts"].items()
    }
    assert f"take {ratio['Q8_0, columns']:.2f} times as long with Q8_0 codes" in text
    assert f"{ratio['bfloat16']:.1f} and {ratio['int8 dot']:.1f} times as long" in text
    assert f"{ratio['Q8_0, native']:.2f} times float32's time with Q8_0 codes" in text
    assert f"and {ratio['Q4_1, native']:.2f} with Q4_1's" in text
    runs = result("pretrained_speed.json")["runs"]
    speedup = (
        runs["llama, 2 thread(s)"]["decode_tokens_per_s"]
        / runs["jax, 2 thread(s)"]["decode_tokens_per_s"]
    )
    assert f"{speedup:.1f} times as fast as the book's float32 code" in text


@functools.cache
def records_script():
    """benchmarks/records.py, imported beside the two modules it imports from its folder."""
    script = ROOT / "benchmarks" / "records.py"
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location("records", script)
        module = importlib.util.module_from_spec(spec)
        sys.modules["records"] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(script.parent))
    return module


def test_the_records_table_is_the_committed_runs():
    records = records_script()
    heading = "## Records on two CPU cores"
    text = APPENDIX[APPENDIX.index(heading) :]
    start = text.index("\n|") + 1
    end = text.index("\n\n", start)
    assert text[start:end] == records.table()


def test_each_record_run_is_what_its_file_says():
    records = records_script()
    for name, record in records.RECORDS.items():
        files = [records.result_path(name, isa) for isa in records.INSTRUCTION_SETS]
        assert any(path.exists() for path in files), name
        for path in filter(Path.exists, files):
            committed = json.loads(path.read_text())
            # the file's name says the processor the runs had
            assert path == records.result_path(name, records.instruction_set(committed["machine"]))
            check_record_runs(record, committed, path.name)


def check_record_runs(record, committed: dict, name: str) -> None:
    """The checks of one record's result file, named ``name`` in a failure's message."""
    assert committed["seconds"] == record.seconds, name  # not a quick trial's --seconds
    runs = committed["runs"]
    assert sorted(run["seed"] for run in runs) == [0, 1, 2], name
    for run in runs:
        final = run["held_out"][-1][record.figure]
        assert run["final"] == final
        assert run["reached"] == (
            final >= record.target if record.higher_is_better else final <= record.target
        )
        # the clock never ran past the record's seconds
        assert run["total_seconds"] <= record.seconds, (name, run["seed"])
        assert run["steps"] == run["train"]["step"][-1] <= run["recipe"]["steps"]
