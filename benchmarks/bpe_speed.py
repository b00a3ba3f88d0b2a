"""Byte-pair encoding speed: training 1,000 merges on the whole Shakespeare corpus (one core,
pure Python), then encoding with the trained merges and with GPT-2's, ours beside tiktoken (Rust,
built from the same ranks) on the same text in the same run.

Encoding is timed twice for ours: "first pass" on a fresh tokeniser (every distinct chunk is
merged from its bytes) and "second pass" (chunks come from the tokeniser's cache, as they do for
most of any long English text). Megabytes are of UTF-8 text.

    python benchmarks/bpe_speed.py [--merges 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import tiktoken

from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.tokenisers import GPT2_PATTERN, BytePairEncoding


def best_of(repeats, function):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def as_tiktoken(bpe: BytePairEncoding, name: str) -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name,
        pat_str=GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in enumerate(bpe.token_bytes)},
        special_tokens=bpe.special_tokens,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--merges", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    corpus = load_shakespeare("all")
    start = time.perf_counter()
    trained = BytePairEncoding.train(corpus, 256 + args.merges)
    train_seconds = time.perf_counter() - start
    print(
        f"training: {len(trained.merges)} merges on {len(corpus):,} characters"
        f" in {train_seconds:.2f} s"
    )

    text = load_shakespeare("validation")
    megabytes = len(text.encode("utf-8")) / 1e6
    print(f"encoding the held-out plays ({megabytes:.2f} MB), best of {args.repeats}:")
    for label, bpe in (("trained", trained), ("GPT-2", BytePairEncoding.gpt2())):
        fresh = BytePairEncoding.from_dict(bpe.to_dict())
        start = time.perf_counter()
        ours = fresh.encode(text)
        first = time.perf_counter() - start
        second, again = best_of(args.repeats, lambda fresh=fresh: fresh.encode(text))
        reference = as_tiktoken(bpe, label)
        theirs_seconds, theirs = best_of(
            args.repeats, lambda reference=reference: reference.encode_ordinary(text)
        )
        assert ours == again == theirs, "the two implementations disagree"
        print(
            f"  {label:8s} ours first pass {megabytes / first:6.2f} MB/s,"
            f" second pass {megabytes / second:6.2f} MB/s;"
            f" tiktoken {megabytes / theirs_seconds:6.2f} MB/s"
            f" ({len(ours):,} tokens, same ids;"
            f" tiktoken/ours {second / theirs_seconds:.1f}x)"
        )


if __name__ == "__main__":
    main()
