"""The measurements appendix and the benchmarks' README are their result files, as rounded.

- Every table of ``book/appendix_measurements.md`` and the records table of
  ``benchmarks/README.md`` is built by ``benchmarks/tables.py`` from the committed files in
  ``benchmarks/results/`` (chapter 9's row beside nanoGPT from its saved run in
  ``book/checkpoints/``), with the machine as the file records it; a page that differs from what
  the script builds fails here, and so does a table that no script builds.
- No table has a column for a goal (target, budget, threshold and the like).
- The figures the appendix's prose quotes follow from the same files.
- The appendix is a reference, not a lab notebook: at most ``WORD_LIMIT`` words, no sentence over
  ``SENTENCE_LIMIT`` words, no history, no processor named outside the generated lines.

The ``test_detector_*`` tests show that each check can fail.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPENDIX_PATH = ROOT / "book" / "appendix_measurements.md"
README_PATH = ROOT / "benchmarks" / "README.md"
APPENDIX = APPENDIX_PATH.read_text(encoding="utf8")
WORD_LIMIT = 3000  # the appendix of main 49b1103 counts 6,220 words by words() (the review: 6,238)
SENTENCE_LIMIT = 40


def benchmark_script(name: str):
    """``benchmarks/NAME.py``, imported beside the modules it imports from its folder."""
    script = ROOT / "benchmarks" / f"{name}.py"
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a dataclass looks its module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(script.parent))
    return module


@functools.cache
def tables():
    return benchmark_script("tables")


@functools.cache
def records_script():
    return benchmark_script("records")


def result(name: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / name).read_text())


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# ---- the tables are the files ---------------------------------------------------------------


@pytest.mark.parametrize("path", [APPENDIX_PATH, README_PATH], ids=lambda p: p.name)
def test_every_generated_block_is_built_from_its_files(path):
    text = path.read_text(encoding="utf8")
    built = tables().render(text)
    diff = "\n".join(
        difflib.unified_diff(text.splitlines(), built.splitlines(), "page", "from the files", n=0)
    )
    assert built == text, (
        f"{path.name} differs from its result files; run `python benchmarks/tables.py` and "
        f"commit the page with its files:\n{diff}"
    )


def markdown_tables(text: str) -> list[tuple[int, list[str]]]:
    """(line, header cells) of every Markdown table: a ``|`` line above a ``| --- |`` rule."""
    lines = text.split("\n")
    found = []
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.match(r"^\|\s*:?-{3,}", lines[i + 1]):
            found.append((i, [cell.strip() for cell in lines[i].strip().strip("|").split("|")]))
    return found


def unbuilt_tables(text: str) -> list[str]:
    """The header lines of the tables that lie outside every generated block."""
    spans = [(start, end) for _, start, end in tables().blocks(text)]
    return [
        " | ".join(header)
        for line, header in markdown_tables(text)
        if not any(start <= line < end for start, end in spans)
    ]


def test_every_table_of_the_appendix_is_built_by_the_script():
    assert not unbuilt_tables(APPENDIX), "tables with no file behind them"
    names = [name for name, _, _ in tables().blocks(APPENDIX)]
    assert len(names) == len(markdown_tables(APPENDIX)) == len(set(names))


def test_the_readme_holds_the_records_table_and_the_appendix_does_not():
    readme = README_PATH.read_text(encoding="utf8")
    assert [name for name, _, _ in tables().blocks(readme)] == ["records"]
    assert not unbuilt_tables(readme)
    assert "records" not in [name for name, _, _ in tables().blocks(APPENDIX)]
    assert "Records on two CPU cores" not in APPENDIX


def test_detector_finds_a_hand_written_table_and_a_stale_figure(tmp_path):
    hand = APPENDIX + "\n| layout | ms |\n| --- | ---: |\n| float32 | 29.6 |\n"
    assert unbuilt_tables(hand) == ["layout | ms"]
    row = re.search(r"\| float32 \| 537\.9 \| ([\d.]+) \|", APPENDIX)
    changed = f"{float(row.group(1)) + 0.1:.1f}"
    stale = APPENDIX.replace(row.group(0), f"| float32 | 537.9 | {changed} |")
    assert stale != APPENDIX and tables().render(stale) != stale
    # a result file measured again, and the page not rebuilt
    results = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks" / "results", results)
    measured = json.loads((results / "quantised_matvec.json").read_text())
    measured["layouts"]["float32"]["ms_per_step"] *= 1.1
    (results / "quantised_matvec.json").write_text(json.dumps(measured))
    assert tables().render(APPENDIX, tables().Files(results)) != APPENDIX
    # and a table whose marker names no builder
    with pytest.raises(KeyError, match="no table named"):
        tables().render("% table: nothing\n\n| a |\n| --- |\n| 1 |\n")


GOAL = re.compile(
    r"\b(?:target|goal|budget|threshold|objective|aim|bar|quota|to beat|required|"
    r"limit|reached|met)s?\b",
    re.IGNORECASE,
)


def goal_columns(text: str) -> list[str]:
    return [cell for _, header in markdown_tables(text) for cell in header if GOAL.search(cell)]


@pytest.mark.parametrize("path", [APPENDIX_PATH, README_PATH], ids=lambda p: p.name)
def test_no_table_has_a_column_for_a_goal(path):
    assert not goal_columns(path.read_text(encoding="utf8"))


def test_detector_finds_a_goal_column():
    assert goal_columns("| record | Target | seconds |\n| --- | ---: | ---: |\n") == ["Target"]
    assert goal_columns("| run | budget (s) |\n| --- | --- |\n") == ["budget (s)"]
    assert goal_columns("| run | seconds |\n| --- | --- |\n") == []


# ---- the machines are the files' -----------------------------------------------------------


def test_a_machine_is_named_from_what_its_file_records():
    describe = benchmark_script("report").describe_machine
    assert describe({"cpu": "AMD EPYC", "avx512": False, "cores": 2, "jax": "0.10.2"}) == (
        "AMD EPYC without AVX-512, 2 cores, JAX 0.10.2"
    )
    assert describe({"processor": "Intel(R) Xeon(R) Processor", "avx512": True}) == (
        "Intel(R) Xeon(R) Processor with AVX-512"
    )
    assert "does not record whether it has AVX-512" in describe({"cpu": "AMD EPYC"})
    unnamed = describe({"cpu": "x86_64", "cores": 2})
    assert "x86_64" not in unnamed and "neither its name nor" in unnamed
    assert "XLA_FLAGS=--xla_cpu_max_isa=AVX2" in describe(
        {"cpu": "AMD EPYC", "avx512": True, "xla_flags": "--xla_cpu_max_isa=AVX2"}
    )


def prose_outside_blocks(text: str) -> str:
    lines = text.split("\n")
    for _, start, end in reversed(tables().blocks(text)):
        del lines[start:end]
    return "\n".join(lines)


def test_only_the_generated_lines_name_a_processor():
    names = re.compile(r"EPYC|Xeon|Intel|\bAMD\b|AVX|\bGPU|H200", re.IGNORECASE)
    assert not names.findall(prose_outside_blocks(APPENDIX))
    lines = APPENDIX.split("\n")
    for name, start, _ in tables().blocks(APPENDIX):
        if name != "nanogpt":  # a saved run, which records no machine, and published figures
            assert lines[start + 1].startswith("Measured on "), name


# ---- the prose's figures follow from the files -----------------------------------------------


def section(heading: str) -> str:
    text = APPENDIX[APPENDIX.index(heading) :]
    end = text.find("\n## ", 1)
    return one_line(text if end < 0 else text[:end])


def test_chapter_9_beside_nanogpt():
    header, _ = tables().saved_run(ROOT / "book" / "checkpoints" / "shakespeare_lm.eqx")
    recipe = header["recipe"]
    text = section("## Chapter 9's language model beside nanoGPT")
    windows = recipe["steps"] * recipe["batch_size"]
    assert f"fewer windows: {2000 * 12:,} against {windows:,}" in text and 2000 * 12 < windows
    assert "Chapter 9's run ends lower" in text
    assert header["history"]["evaluations"][-1]["nats_per_symbol"] < 1.88


def test_the_ablation_prose_follows_from_its_file():
    measured = result("lm_ablation.json")
    text = section("## What each modern change buys")
    assert f"for the same {measured['budget_seconds']:.0f} s" in text
    calls = {run["recipe"]["steps_per_call"] for run in measured["runs"]}
    assert calls == {25} and "each compiled call of 25 steps" in text
    single: dict[str, list[float]] = {}  # each change alone: its losses, a seed each
    for run in measured["runs"]:
        if run["name"] != "baseline" and "combined" not in run["name"]:
            single.setdefault(run["name"], []).append(run["nats_per_char"])
    baseline = next(r["nats_per_char"] for r in measured["runs"] if r["name"] == "baseline")
    change = {name: max(losses) - baseline for name, losses in single.items()}
    spread = max(  # the seed spread the text cites: the record runs' three seeds
        max(finals) - min(finals)
        for kind in ("avx512", "avx2")
        for finals in [[r["final"] for r in result(f"record_language_model_{kind}.json")["runs"]]]
    )
    assert f"ended at most {spread:.3f} nats/char apart" in text
    wider = [name for name, c in change.items() if abs(c) > spread]
    assert wider == ["muon"] and "only Muon's is wider than that" in text
    assert f"{-change['muon']:.3f} nats/char below chapter 9's model" in text
    with_muon = [
        r["nats_per_char"]
        for r in measured["runs"]
        if "muon" in r["name"] or "combined" in r["name"]
    ]
    assert len(with_muon) == 3
    assert f"within {max(with_muon) - min(with_muon):.3f} of each other" in text
    assert max(with_muon) - min(with_muon) < spread
    assert "Each row ran one seed; the seed column says which" in text


def test_the_seed_runs_are_what_their_file_and_the_saved_runs_say():
    """Each seed-0 run of seed_spread.json is the chapter's saved run (its last evaluation, to
    the rounding of another processor), whether the script trained it again or read it; and
    the spreads the file and the table give are its runs' own."""
    measured = result("seed_spread.json")
    saved = {
        ("ablation", "baseline"): "shakespeare_adamw_200.eqx",
        ("ablation", "muon"): "shakespeare_muon_200.eqx",
        ("ch13", "characters"): "shakespeare_characters_300.eqx",
        ("ch13", "BPE"): "shakespeare_bpe_300.eqx",
    }
    checked = 0
    for run in measured["runs"]:
        name = saved.get((run["group"], run["variant"]))
        if name is None or run["seed"] != 0:
            continue
        header, _ = tables().saved_run(ROOT / "book" / "checkpoints" / name)
        assert run["recipe"] == header["recipe"]
        final = header["history"]["evaluations"][-1]
        assert final["step"] == run["steps"]
        assert abs(final["nats_per_symbol"] - run["nats_per_symbol"]) < 1e-4, run["variant"]
        checked += 1
    assert checked == len(saved)
    # the control: another seed is another run (the seed reaches the weights or the batches)
    first = {
        (r["group"], r["variant"]): r["nats_per_symbol"] for r in measured["runs"] if r["seed"] == 0
    }
    for run in measured["runs"]:
        if run["seed"] != 0 and (run["group"], run["variant"]) in first:
            assert abs(run["nats_per_symbol"] - first[run["group"], run["variant"]]) > 1e-4
    for group, variants in measured["spreads"].items():
        for variant, entry in variants.items():
            key = "bits_per_character" if group == "ch13" else "nats_per_symbol"
            finals = {
                r["seed"]: r[key]
                for r in measured["runs"]
                if (r["group"], r["variant"]) == (group, variant)
            }
            assert entry["finals"] == [finals[seed] for seed in entry["seeds"]]
            assert math.isclose(entry["spread"], max(finals.values()) - min(finals.values()))
    complete = [
        (group, variant)
        for group, variants in measured["spreads"].items()
        for variant, entry in variants.items()
        if sorted(entry["seeds"]) == [0, 1, 2]
    ]
    table = tables().seed_spread(tables().Files())
    assert len(markdown_tables(table)) == 1 and table.count("\n| ") == len(complete) + 2


def test_the_llama_cpp_prose_follows_from_its_file():
    measured = result("pretrained_speed.json")
    runs, agreed = measured["runs"], measured["tokens_equal_to_book_before_first_difference"]
    jax, llama = runs["jax, 2 thread(s)"], runs["llama, 2 thread(s)"]
    text = section("## SmolLM2 in the book's code, transformers and llama.cpp")
    speedup = llama["decode_tokens_per_s"] / jax["decode_tokens_per_s"]
    assert f"llama.cpp decodes {speedup:.1f} times as fast as the book's code" in text
    assert 0.28 < llama["peak_mib"] / jax["peak_mib"] < 0.39 and "a third of the memory" in text
    assert f"for the first {agreed['llama']} of 64" in text and agreed["torch"] == 64
    assert {r["prompt_tokens"] for r in runs.values()} == {41} and "prompt of 41 tokens" in text
    assert {len(r["tokens"]) for r in runs.values()} == {64} and "generates 64 tokens" in text


def test_the_blocks_prose_follows_from_its_file():
    measured = result("pretrained_speed_blocks.json")
    two = {
        name: measured["runs"][f"{name}, 2 thread(s)"]
        for name in ("jax", "jax-blocks", "jax-blocks-q8", "llama")
    }
    agreed = measured["tokens_equal_to_book_before_first_difference"]
    text = section("## SmolLM2 with its weights kept in blocks")

    def decode_ratio(a, b):
        return two[a]["decode_tokens_per_s"] / two[b]["decode_tokens_per_s"]

    peaks = (two["jax-blocks"]["peak_mib"], two["jax"]["peak_mib"])
    assert (
        f"decode {decode_ratio('jax-blocks', 'jax'):.2f} times as fast as the float32 model, "
        "in {:,.0f} MiB against {:,.0f}, with the same greedy tokens".format(*peaks)
        in text
    )
    assert agreed["jax-blocks"] == 64 and agreed["jax-blocks-q8"] < 64
    assert (
        f"decoding is {decode_ratio('jax-blocks-q8', 'jax'):.2f} times as fast as float32's and "
        f"{decode_ratio('jax-blocks-q8', 'llama'):.2f} times llama.cpp's" in text
    )
    assert "30 blocks" in text and measured["runs"]["jax, 1 thread(s)"]["prompt_tokens"] == 41


def test_the_adapters_prose_follows_from_its_file():
    measured = result("smollm2_dates_lora.json")
    text = section("## Adapting SmolLM2 to the dates")
    recipe = measured["recipe"]
    assert recipe["weight_decay"] == 0 and "AdamW without weight decay" in text
    assert f"a peak learning rate of {recipe['learning_rate']}" in text
    assert f"after {recipe['warmup_steps']} warm-up steps" in text and recipe["seed"] == 0
    assert f"rank-{measured['rank']} adapters" in text
    assert f"writes {measured['train_pairs']:,} dates" in text
    assert f"load_test_sets({measured['test_pairs_per_set']}, seed=0)" in text
    assert f"--steps {recipe['steps']} --test-size {measured['test_pairs_per_set']}" in text
    before = [figures["accuracy"] for figures in measured["before"].values()]
    assert f"{100 * min(before):.0f} to {100 * max(before):.0f}% of the answers' tokens" in text
    assert all(figures["exact_match"] == 0 for figures in measured["before"].values())


def test_the_products_prose_follows_from_its_file():
    measured = result("quantised_matvec.json")
    layouts = measured["layouts"]
    text = section("## Products with 8-bit weights on the CPU")
    assert f"{measured['weights'] / 1e6:.1f} million weights" in text
    assert "--rounds 5 --calls 10" in measured["command"] and "5 rounds of 10 calls" in text
    compiled = [f for name, f in layouts.items() if "native" not in name and name != "float32"]
    native = [f for name, f in layouts.items() if "native" in name]
    assert all(f["relative_to_float32"] > 1 for f in compiled)
    assert all(f["relative_to_float32"] < 1 for f in native)
    assert "Every form that XLA compiles takes longer than float32, and every hand-written" in text

    def rate(f):
        return f["weights_mb"] / f["ms_per_step"]

    assert all(rate(f) < rate(layouts["float32"]) for f in native)
    assert rate(layouts["Q4_1, native"]) < rate(layouts["Q8_0, native"])


def test_the_scan_prose_follows_from_its_file():
    measured = result("scan_blocks.json")
    loop, scan = measured["medians"]["loop"], measured["medians"]["scan"]
    text = section("## Blocks in a loop or in a scan")
    assert scan["generate_first_s"] / loop["generate_first_s"] < 0.6
    assert "Scanning halves the first call of the 30-block model" in text
    assert scan["generate_s"] > loop["generate_s"] and "decoding is slower" in text
    assert f"a {loop['prompt_tokens']}-token prompt" in text
    assert f"--repeats {len(measured['runs']['loop'])}" in text


def test_wilson_interval_is_the_score_tests_inversion():
    z = 1.959963984540054  # the normal quantile at 0.975

    def score_bound(k, n, lower):
        # the p0 at which |k/n - p0| = z sqrt(p0 (1 - p0) / n), on the side asked, by bisection
        p = k / n
        lo, hi = (0.0, p) if lower else (p, 1.0)
        if (lower and k == 0) or (not lower and k == n):
            return p
        for _ in range(200):
            mid = (lo + hi) / 2
            inside = abs(p - mid) <= z * math.sqrt(mid * (1 - mid) / n)
            if inside == lower:
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    for k, n in [(0, 200), (130, 200), (71, 200), (88, 200), (5, 10), (200, 200)]:
        low, high = tables().wilson_interval(k, n)
        assert low == pytest.approx(score_bound(k, n, True), abs=1e-9), (k, n)
        assert high == pytest.approx(score_bound(k, n, False), abs=1e-9), (k, n)
    assert tables().wilson_interval(0, 200)[1] > 0.01  # not the Wald interval, which is (0, 0)
    with pytest.raises(ValueError, match="no whole number"):
        tables().exact_match(0.6512, 200)


# ---- records ------------------------------------------------------------------------------------


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
        assert run["final"] == run["held_out"][-1][record.figure]
        # the clock never ran past the record's seconds
        assert run["total_seconds"] <= record.seconds, (name, run["seed"])
        assert run["steps"] == run["train"]["step"][-1] <= run["recipe"]["steps"]


# ---- chapter 16 quotes the same files ----------------------------------------------------------


def unbacked_rates(text: str, layouts: dict) -> list[str]:
    """Each "N GB/s" of ``text`` that is no layout's read rate, as the appendix rounds it."""
    rates = {f"{f['weights_mb'] / f['ms_per_step']:.1f}" for f in layouts.values()}
    return [m.group(0) for m in re.finditer(r"(\d+\.\d) GB/s", text) if m.group(1) not in rates]


def test_chapter_16_quotes_the_products_rates_of_the_committed_run():
    # Chapter 16 sets the products' read rates beside equation (eq-ch16-bandwidth); its cells
    # read the same file. The rates it writes in its prose must be the file's.
    cells = json.loads((ROOT / "book" / "16_quantisation_and_adapters.ipynb").read_text())["cells"]
    text = one_line(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"))
    layouts = result("quantised_matvec.json")["layouts"]
    assert not unbacked_rates(text, layouts)
    q8 = layouts["Q8_0, native"]
    backed = f"{q8['weights_mb'] / q8['ms_per_step']:.1f} GB/s"
    unbacked = "0.1 GB/s"  # a rate no layout of the file reads at (asserted)
    assert unbacked not in {
        f"{f['weights_mb'] / f['ms_per_step']:.1f} GB/s" for f in layouts.values()
    }
    assert unbacked_rates(f"streams {backed}, not {unbacked}", layouts) == [unbacked]


# ---- a reference, not a lab notebook -------------------------------------------------------------

_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
_MARKUP = re.compile(r"^\([\w:-]+\)=[ \t]*$|^%.*$|^<!--.*-->[ \t]*$", re.MULTILINE)


def words(markdown: str) -> int:
    """Words of a page with its code blocks, maths, labels and comments removed (tables count)."""
    return len(_MARKUP.sub("", _MATH.sub("", _FENCE.sub("", markdown))).split())


def prose_sentences(markdown: str) -> list[str]:
    """The sentences of a page's paragraphs and list items; tables, code and headings left out."""
    text = _MARKUP.sub("", _MATH.sub("x", _FENCE.sub("", markdown)))
    paragraphs = re.split(r"\n\s*\n|\n(?=- |\* )", text)
    sentences = []
    for paragraph in paragraphs:
        if paragraph.lstrip().startswith(("|", "#")):
            continue
        flat = one_line(paragraph).strip()
        sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=\S)", flat) if s]
    return sentences


def long_sentences(markdown: str, limit: int = SENTENCE_LIMIT) -> list[str]:
    return [
        f"{len(s.split())} words: {s}" for s in prose_sentences(markdown) if len(s.split()) > limit
    ]


HISTORY = re.compile(
    r"\b(?:was|were|earlier|previously|no longer|used to|any more|a second run|sessions?|"
    r"since then|at first|20\d\d-\d\d(?:-\d\d)?|(?:last|this) (?:week|month|year))\b",
    re.IGNORECASE,
)


def history(markdown: str) -> list[str]:
    prose = " ".join(prose_sentences(markdown))
    return [one_line(prose[max(0, m.start() - 40) : m.end() + 40]) for m in HISTORY.finditer(prose)]


def test_the_appendix_is_short():
    count = words(APPENDIX)
    assert count <= WORD_LIMIT, f"{count} words; at most {WORD_LIMIT}"


def test_the_appendix_has_no_long_sentence():
    assert not long_sentences(APPENDIX)


def test_the_appendix_tells_no_history():
    assert not history(APPENDIX)


def test_detector_counts_words_and_finds_long_sentences_and_history():
    assert words("One two $x + y$ three.\n\n```\ncode here\n```\n(label)=\n% table: x\n") == 3
    long = "This sentence " + "goes on " * 20 + "and ends."
    assert long_sentences(f"Short one. {long} Another short one.") == [
        f"{len(long.split())} words: {long}"
    ]
    assert long_sentences("| a table row " + "with words " * 30 + "|\n") == []
    assert history("The figure was measured on a quiet day.") != []
    assert history("A second run gave 42.8 tokens/s.") != []
    assert history("The file records the machine (measured 2026-11-30).") != []
    assert history("The file records the machine it ran on.") == []
