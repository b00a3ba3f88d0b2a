"""The tables of ``book/appendix_measurements.md`` and ``benchmarks/README.md``, built from the
committed result files in ``benchmarks/results/`` (and, for chapter 9's row beside nanoGPT, from
the chapter's saved run in ``book/checkpoints/``).

In those pages every table follows a comment line that names its builder: ``% table: NAME`` in
the book's MyST Markdown, ``<!-- table: NAME -->`` in the README. Everything from that line to
the end of the table after it is this script's output: the machine the file records, in words
(``report.describe_machine``), then the table. ``tests/test_measurement_tables.py`` fails when a
page's block differs from what this script builds from the files.

    python benchmarks/tables.py           # rewrite the blocks in both pages from the files
    python benchmarks/tables.py --check   # exit 1, naming each block that differs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from report import describe_machine  # beside this script

from transformer_intro.training.evaluation import wilson_interval

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CHECKPOINTS = ROOT / "book" / "checkpoints"
PAGES = (ROOT / "book" / "appendix_measurements.md", ROOT / "benchmarks" / "README.md")
MARKER = re.compile(r"^(?:% |<!-- )table: ([\w-]+)(?: -->)?[ \t]*$")


class Files:
    """Where the tables' files are: the result files and the book's saved runs."""

    def __init__(self, results: Path = RESULTS, checkpoints: Path = CHECKPOINTS):
        self.results, self.checkpoints = Path(results), Path(checkpoints)

    def result(self, name: str) -> dict:
        path = self.results / name
        if not path.exists():
            raise FileNotFoundError(
                f"{path} is missing: its table cannot be built. Run the script that writes it "
                "(benchmarks/README.md names it), or delete the table from its page."
            )
        return json.loads(path.read_text())


def measured_on(result: dict) -> str:
    """The sentence that opens a block: the file's machine and its load, as the file records."""
    start = result.get("load_average_before", result.get("load_average_start"))
    end = result.get("load_average_after", result.get("load_average_end"))
    load = ""
    if start is not None and end is not None:
        load = f" (one-minute load average {start[0]:.1f} before the runs, {end[0]:.1f} after)"
    return f"Measured on {describe_machine(result['machine'])}{load}."


def markdown_table(header: list[str], align: str, rows: list[list[str]]) -> str:
    """A Markdown table; ``align`` has one letter a column, ``l`` or ``r``."""
    if len(header) != len(align) or any(len(row) != len(header) for row in rows):
        raise ValueError("a table needs one alignment and one cell per column in every row")
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def exact_match(share: float, trials: int) -> str:
    """An exact-match share of ``trials`` pairs with its 95% interval, in per cent."""
    successes = round(share * trials)
    if abs(successes - share * trials) > 1e-3:
        raise ValueError(f"an exact match of {share} is no whole number of {trials} pairs")
    low, high = wilson_interval(successes, trials)
    return f"{100 * share:.1f}% ({100 * low:.1f}-{100 * high:.1f})"


# ---- chapter 9 beside nanoGPT ---------------------------------------------------------------

# nanoGPT's README (karpathy2022nanogpt), character-level Shakespeare on its tiny_shakespeare.
NANOGPT_ROWS = [
    [
        "nanoGPT, CPU recipe",
        "0.80M",
        "4 × 128",
        "tiny_shakespeare, its last tenth",
        "2,000 steps of 12 windows of 64 characters, a laptop's CPU, about 3 minutes",
        "1.88 (published)",
    ],
    [
        "nanoGPT, GPU recipe",
        "10.65M",
        "6 × 384",
        "tiny_shakespeare, its last tenth",
        "5,000 steps of 64 windows of 256 characters, one A100, about 3 minutes",
        "1.47 (published)",
    ],
]


def saved_run(path: Path) -> tuple[dict, int]:
    """A checkpoint's header and the number of numbers in its arrays (its parameters)."""
    with path.open("rb") as f:
        header = json.loads(f.readline())
        numbers = 0
        while f.peek(1):  # the arrays follow the header one after another, as numpy writes them
            numbers += np.lib.format.read_array(f, allow_pickle=False).size
    return header, numbers


def nanogpt(files: Files) -> str:
    header, parameters = saved_run(files.checkpoints / "shakespeare_lm.eqx")
    config, recipe = header["model_config"], header["recipe"]
    final = header["history"]["evaluations"][-1]
    if final["step"] != recipe["steps"]:
        raise ValueError("chapter 9's saved run has no evaluation after its last step")
    chapter = [
        "chapter 9",
        f"{parameters / 1e6:.2f}M",
        f"{config['num_blocks']} × {config['block']['dim']}",
        "four held-out plays",
        f"{recipe['steps']:,} steps of {recipe['batch_size']} windows of {config['window']} "
        "characters",
        f"{final['nats_per_symbol']:.2f}",
    ]
    return markdown_table(
        ["run", "parameters", "blocks × width", "held-out text", "training", "nats/char"],
        "lrllll",
        [*NANOGPT_ROWS, chapter],
    )


# ---- chapter 14: what each change buys --------------------------------------------------------


def ablation(files: Files) -> str:
    result = files.result("lm_ablation.json")
    groups: dict[str, list[dict]] = {}
    for run in result["runs"]:
        groups.setdefault(run["label"], []).append(run)

    def each(runs, figure):
        return ", ".join(figure(run) for run in runs)

    rows = [
        [
            label,
            each(runs[:1], lambda r: f"{r['parameters']:,}"),
            each(runs, lambda r: str(r["recipe"]["seed"])),
            each(runs, lambda r: f"{r['steps']:,}"),
            each(runs, lambda r: f"{r['seconds']:.0f}"),
            each(runs, lambda r: f"{r['nats_per_char']:.3f}"),
            each(runs, lambda r: f"{r['bits_per_char']:.3f}"),
        ]
        for label, runs in groups.items()
    ]
    table = markdown_table(
        ["run", "parameters", "seed", "steps", "seconds", "held-out nats/char", "bits/char"],
        "lrrrrrr",
        rows,
    )
    return f"{measured_on(result)}\n\n{table}"


# ---- chapters 13 and 14: three seeds of each run ----------------------------------------------

SEED_RUNS = {  # the runs of seed_spread.py, in the words of the lm-ablation table and chapter 13
    ("ablation", "baseline"): "chapter 9's model (AdamW)",
    ("ablation", "rmsnorm"): "RMSNorm",
    ("ablation", "swiglu"): "SwiGLU",
    ("ablation", "gqa"): "grouped-query attention, 2 key-value heads",
    ("ablation", "qk_norm"): "QK-norm",
    ("ablation", "rotary"): "rotary base 100,000, half layout",
    ("ablation", "muon"): "Muon",
    ("ablation", "combined"): "all together",
    ("ablation", "combined_plus"): "all together, ReLU² MLP instead of SwiGLU, 6 blocks",
    ("ch13", "characters"): "characters",
    ("ch13", "BPE"): "512 byte-pair tokens",
}
SEED_GROUPS = {"ablation": ("14", "nats/char"), "ch13": ("13", "bits/char")}


def seed_spread(files: Files) -> str:
    result = files.result("seed_spread.json")
    rows = []
    for group, (chapter, unit) in SEED_GROUPS.items():
        for variant, entry in result["spreads"].get(group, {}).items():
            if sorted(entry["seeds"]) != [0, 1, 2]:
                continue  # a run with fewer seeds has no spread to show yet
            runs = sorted(
                (r for r in result["runs"] if (r["group"], r["variant"]) == (group, variant)),
                key=lambda r: r["seed"],
            )
            finals = [
                r["bits_per_character" if group == "ch13" else "nats_per_symbol"] for r in runs
            ]
            if finals != [entry["finals"][entry["seeds"].index(r["seed"])] for r in runs]:
                raise ValueError(f"seed_spread.json: the spreads of {group} {variant} are stale")
            rows.append(
                [
                    chapter,
                    SEED_RUNS[group, variant],
                    ", ".join(f"{r['steps']:,}" for r in runs[:1]),
                    ", ".join(str(r["seed"]) for r in runs),
                    ", ".join(f"{f:.3f}" for f in finals),
                    f"{np.mean(finals):.3f}",
                    f"{max(finals) - min(finals):.3f}",
                    unit,
                ]
            )
    start = result["invocations"][0]["load_average_start"]
    ends = [r["load_average"][1] for r in result["runs"]]
    opening = (
        f"Measured on {describe_machine(result['machine'])} (one-minute load average "
        f"{start[0]:.1f} at the start, {min(e[0] for e in ends):.1f} to "
        f"{max(e[0] for e in ends):.1f} after the runs)."
    )
    table = markdown_table(
        ["chapter", "run", "steps", "seeds", "held-out loss", "mean", "spread", "unit"],
        "llrrrrrl",
        rows,
    )
    return f"{opening}\n\n{table}"


# ---- chapters 15 and 16: SmolLM2 ---------------------------------------------------------------


def pretrained_speed(files: Files) -> str:
    result = files.result("pretrained_speed.json")
    runs = result["runs"]
    order = [
        f"{name}, {threads} thread(s)" for name in ("jax", "torch", "llama") for threads in (1, 2)
    ]
    figures = [
        ("prefill, tokens/s", lambda r: f"{r['prefill_tokens_per_s']:.0f}"),
        ("decoding, tokens/s", lambda r: f"{r['decode_tokens_per_s']:.1f}"),
        ("peak memory, MiB", lambda r: f"{r['peak_mib']:,.0f}"),
    ]
    header = ["", "book's code, 1 core", "2 cores", "transformers, 1 core", "2 cores"]
    header += ["llama.cpp, 1 core", "2 cores"]
    rows = [[name, *(figure(runs[key]) for key in order)] for name, figure in figures]
    return f"{measured_on(result)}\n\n{markdown_table(header, 'lrrrrrr', rows)}"


BLOCKS_ROWS = {  # the blocks table's rows: the benchmark's names, in order
    "jax": "book's code, float32",
    "jax-blocks": "book's code, blocks",
    "jax-blocks-q8": "blocks, Q8_0 vectors",
    "jax-blocks-scan": "blocks, scanned",
    "jax-blocks-q8-scan": "blocks, Q8_0 vectors, scanned",
    "torch": "transformers",
    "llama": "llama.cpp",
}


def pretrained_speed_blocks(files: Files) -> str:
    result = files.result("pretrained_speed_blocks.json")
    agreed = result["tokens_equal_to_book_before_first_difference"]
    rows = []
    for name, label in BLOCKS_ROWS.items():
        for threads in (1, 2):
            r = result["runs"][f"{name}, {threads} thread(s)"]
            same = "" if name == "jax" else str(agreed[name])
            rows.append(
                [
                    label,
                    str(threads),
                    f"{r['prefill_tokens_per_s']:.0f}",
                    f"{r['decode_tokens_per_s']:.1f}",
                    f"{r['peak_after_loading_mib']:,.0f}",
                    f"{r['peak_mib']:,.0f}",
                    same,
                ]
            )
    header = ["", "cores", "prefill, tokens/s", "decoding, tokens/s"]
    header += ["peak after loading, MiB", "peak, MiB", "tokens as float32's"]
    return f"{measured_on(result)}\n\n{markdown_table(header, 'lrrrrrr', rows)}"


def smollm2_dates(files: Files) -> str:
    result = files.result("smollm2_dates_lora.json")
    n = result["test_pairs_per_set"]
    phases = [("before", "before training")]
    if "few_shot" in result:
        phases.append(("few_shot", f"{len(result.get('shots', []))}-shot, untrained"))
    phases.append(("after", "after training"))
    header = ["held-out set", *(f"exact match {label}" for _, label in phases)]
    header += ["answer loss before (nats/token)", "after"]
    rows = [
        [
            name,
            *(exact_match(result[phase][name]["exact_match"], n) for phase, _ in phases),
            f"{result['before'][name]['loss']:.2f}",
            f"{result['after'][name]['loss']:.2f}",
        ]
        for name in result["after"]
    ]
    table = markdown_table(header, "l" + "r" * (len(header) - 1), rows)
    took = (
        f"Training took {result['seconds_training']:.0f} s, compilation included, "
        if "seconds_training" in result
        else "The run shared its machine with other work and is not timed; "
    )
    seconds = (
        f"{took}{result['recipe']['steps']} steps of {result['recipe']['batch_size']} pairs; "
        f"{n} pairs a held-out set, and each exact match has its 95% interval (Wilson's)."
    )
    return f"{measured_on(result)} {seconds}\n\n{table}"


def quantised_matvec(files: Files) -> str:
    result = files.result("quantised_matvec.json")
    rows = [
        [
            name,
            f"{f['weights_mb']:.1f}",
            f"{f['ms_per_step']:.1f}",
            f"{f['relative_to_float32']:.2f}",
            f"{f['weights_mb'] / f['ms_per_step']:.1f}",
        ]
        for name, f in result["layouts"].items()
    ]
    header = ["layout", "weights read (MB)", "ms per step", "time against float32"]
    header += ["weights read per second (GB/s)"]
    return f"{measured_on(result)}\n\n{markdown_table(header, 'lrrrr', rows)}"


SCAN_ROWS = {
    "train_step_first_s": "chapter 9's training step, first call",
    "train_step_s": "chapter 9's training step",
    "forward_first_s": "SmolLM2 forward pass, first call",
    "forward_s": "SmolLM2 forward pass",
    "generate_first_s": "SmolLM2 `generate_ids`, first call",
    "generate_s": "SmolLM2 `generate_ids`",
}


def scan_blocks(files: Files) -> str:
    result = files.result("scan_blocks.json")
    loop, scan = result["medians"]["loop"], result["medians"]["scan"]
    rows = [
        [label, f"{loop[key]:.2f}", f"{scan[key]:.2f}", f"{scan[key] / loop[key]:.2f}"]
        for key, label in SCAN_ROWS.items()
    ]
    header = [f"median of {len(result['runs']['loop'])} runs, seconds", "loop", "scan"]
    header += ["scan / loop"]
    return f"{measured_on(result)}\n\n{markdown_table(header, 'lrrr', rows)}"


def infer_in_page(files: Files) -> str:
    result = files.result("infer_in_page.json")
    rows = [
        [
            "ViT of chapter 8: one prediction with its attention maps",
            f"{result['vit_ms_per_prediction']:.1f} ms",
        ],
        [
            "chapter 9's model: sampling 1,000 characters, window refills included",
            f"{result['lm_characters_per_second_sampling_1000']:.0f} characters/s",
        ],
        [
            "chapter 9's model: one cached step",
            f"{result['lm_characters_per_second_cached_steps']:.0f} steps/s",
        ],
    ]
    browser = re.search(r"(HeadlessChrome|Chrome)/(\d+)", result["machine"].get("browser", ""))
    where = measured_on(result)
    if browser:
        where = f"{where[:-1]}, in headless Chromium {browser.group(2)}."
    return f"{where}\n\n{markdown_table(['what', 'figure'], 'lr', rows)}"


# ---- benchmarks/README.md: the records ----------------------------------------------------------

RECORD_ORDER = ("language_model", "vit")
OPTIMISERS = {"adamw": "AdamW", "muon": "Muon"}
INSTRUCTION_SETS = ("avx512", "avx2")


def _figure(result: dict, value: float) -> str:
    return f"{100 * value:.2f}%" if result["figure"] == "accuracy" else f"{value:.3f}"


def records(files: Files) -> str:
    rows = []
    for name in RECORD_ORDER:
        for isa in INSTRUCTION_SETS:
            path = files.results / f"record_{name}_{isa}.json"
            if not path.exists():
                continue
            result = json.loads(path.read_text())
            runs = result["runs"]
            recipes = sorted(
                {(r["recipe"]["batch_size"], r["recipe"]["matrix_optimiser"]) for r in runs}
            )
            rows.append(
                [
                    result["task"],
                    f"{result['seconds']:.0f}",
                    ", ".join(str(r["seed"]) for r in runs),
                    ", ".join(_figure(result, r["final"]) for r in runs),
                    ", ".join(f"{r['steps']:,}" for r in runs),
                    "; ".join(f"{b}, {OPTIMISERS[optimiser]}" for b, optimiser in recipes),
                    describe_machine(result["machine"]),
                    result["date"][:10],
                ]
            )
    header = ["record", "seconds", "seeds", "final figure", "steps", "batch, matrices' optimiser"]
    header += ["processor", "date"]
    return markdown_table(header, "lrllllll", rows)


TABLES: dict[str, Callable[[Files], str]] = {
    "nanogpt": nanogpt,
    "lm-ablation": ablation,
    "seed-spread": seed_spread,
    "pretrained-speed": pretrained_speed,
    "pretrained-speed-blocks": pretrained_speed_blocks,
    "smollm2-dates": smollm2_dates,
    "quantised-matvec": quantised_matvec,
    "scan-blocks": scan_blocks,
    "infer-in-page": infer_in_page,
    "records": records,
}


# ---- the pages ----------------------------------------------------------------------------------


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, end line) of every generated block of a page, lines counted from 0.

    A block runs from the line after its marker to the last line of the first table after it.
    """
    lines = text.split("\n")
    found = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        start = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("|")), None)
        if start is None or any(MARKER.match(lines[k]) for k in range(i + 1, start)):
            raise ValueError(f"line {i + 1}: the marker {line!r} has no table after it")
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        found.append((match.group(1), i + 1, end))
    return found


def render(text: str, files: Files | None = None) -> str:
    """``text`` with every generated block rebuilt from the files."""
    files = files or Files()
    lines = text.split("\n")
    for name, start, end in reversed(blocks(text)):
        if name not in TABLES:
            raise KeyError(f"no table named {name!r}: benchmarks/tables.py builds {list(TABLES)}")
        lines[start:end] = ["", *TABLES[name](files).split("\n")]
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """``text`` into a temporary file beside ``path``, then moved into its place."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf8") as f:
        f.write(text)
    os.replace(f.name, path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 on a difference"
    )
    args = parser.parse_args()
    stale = []
    for page in PAGES:
        text = page.read_text(encoding="utf8")
        built = render(text)
        if built == text:
            continue
        old = {name: text.split("\n")[a:b] for name, a, b in blocks(text)}
        new = {name: built.split("\n")[a:b] for name, a, b in blocks(built)}
        stale += [f"{page.relative_to(ROOT)}: {n}" for n in old if old[n] != new.get(n)]
        if not args.check:
            write_atomically(page, built)
    verb = "differ from their files" if args.check else "rebuilt from their files"
    for line in stale:
        print(f"{verb}: {line}")
    if args.check and stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
