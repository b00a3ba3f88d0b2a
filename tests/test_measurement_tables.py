"""The measurements appendix's tables for chapter 16 are the committed result files, as rounded.

A rerun of ``benchmarks/quantised_matvec.py`` or ``benchmarks/pretrained_speed.py`` that rewrites
its file without the table (or the reverse) fails here.
"""

from __future__ import annotations

import json
import re
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
