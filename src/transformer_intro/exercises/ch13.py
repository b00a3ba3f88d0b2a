"""Chapter 13 (subword tokens): counting pairs, merging a pair, choosing the next merge."""

from __future__ import annotations

from collections import Counter

from ..bpe import _merge_word, _pairs
from .core import Case, Diagnosis, Exercise


def _count(chunks):
    counts = Counter()
    for word, f in chunks.items():
        for pair, k in _pairs(list(word)).items():
            counts[pair] += k * f
    return counts


COUNT_PAIRS = Exercise(
    name="count_pairs",
    chapter=13,
    title="Adjacent pairs counted over chunks, weighted by how often each chunk occurs",
    reference=_count,
    cases=lambda: [
        Case(
            '"hug" x 10, "pug" x 5, "hugs" x 5',
            ({(104, 117, 103): 10, (112, 117, 103): 5, (104, 117, 103, 115): 5},),
        ),
        Case('"aaa" x 3 (overlapping pairs), "ab" x 1', ({(97, 97, 97): 3, (97, 98): 1},)),
        Case("one-symbol chunks only", ({(97,): 3, (98,): 1},)),
    ],  # fmt: skip
    diagnoses=(
        Diagnosis.like(
            "unweighted",
            "each chunk is counted once: weight its pairs by how often the chunk occurs",
            lambda chunks: _count({w: 1 for w in chunks}),
        ),
        Diagnosis.like(
            "once_per_chunk",
            "a pair is counted once per chunk: count every occurrence, 'aaa' holds ('a', 'a') "
            "twice",
            lambda chunks: Counter(
                {
                    p: sum(f for w, f in chunks.items() if p in set(zip(w, w[1:])))
                    for w in chunks
                    for p in zip(w, w[1:])
                }
            ),
        ),  # fmt: skip
        Diagnosis.like(
            "wraps_around",
            "the last symbol is paired with the first: pairs are neighbours inside a chunk",
            lambda chunks: _count({tuple(w) + (w[0],): f for w, f in chunks.items()}),
        ),
    ),
)


def _first_only(word, pair, new):
    for i in range(len(word) - 1):
        if (word[i], word[i + 1]) == tuple(pair):
            return list(word[:i]) + [new] + list(word[i + 2 :])
    return list(word)


def _overlapping(word, pair, new):
    out = [new if (a, b) == tuple(pair) else a for a, b in zip(word, word[1:])]
    return out + ([word[-1]] if word and (len(word) < 2 or (word[-2], word[-1]) != tuple(pair))
                  else [])  # fmt: skip


MERGE_PAIR = Exercise(
    name="merge_pair",
    chapter=13,
    title="Every occurrence of a pair merged into one new token",
    reference=lambda word, pair, new: _merge_word(list(word), tuple(pair), new),
    cases=lambda: [
        Case('"hugs", merge ("u", "g")', ([104, 117, 103, 115], (117, 103), 256)),
        Case('"abab", merge ("a", "b")', ([97, 98, 97, 98], (97, 98), 300)),
        Case('"aaa", merge ("a", "a")', ([97, 97, 97], (97, 97), 256)),
        Case("no occurrence", ([1, 2, 3], (3, 1), 9)),
    ],
    diagnoses=(
        Diagnosis.like(
            "first_only",
            "only the first occurrence is merged: replace every occurrence, left to right",
            _first_only,
        ),
        Diagnosis.like(
            "overlapping",
            "overlapping occurrences are merged twice: after a merge, continue after the pair "
            "('aaa' becomes [new, 'a'])",
            _overlapping,
        ),
    ),
)


def _best(counts):
    """The tie-break of BytePairEncoding.train: the highest count, then the smaller ids."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


MOST_FREQUENT_PAIR = Exercise(
    name="most_frequent_pair",
    chapter=13,
    title="The next merge: the most frequent pair, ties to the smaller ids",
    reference=_best,
    cases=lambda: [
        Case("a clear winner", (Counter({(1, 2): 3, (2, 3): 7, (3, 1): 2}),)),
        Case("a tie, the first counted has the smaller ids", (Counter({(2, 3): 4, (5, 1): 4}),)),
        Case("a tie, the first counted has the larger ids", (Counter({(5, 1): 4, (2, 9): 4}),)),
        Case("a tie on the left id", (Counter({(2, 9): 4, (2, 3): 4, (1, 1): 1}),)),
    ],
    diagnoses=(
        Diagnosis.like(
            "first_counted",
            "a tie goes to the pair counted first: among equal counts, the pair with the "
            "smaller left id wins, then the smaller right id",
            lambda counts: max(counts, key=counts.get),
        ),
        Diagnosis.like(
            "larger_ids",
            "a tie goes to the larger ids: among equal counts the smaller left id wins, then "
            "the smaller right id",
            lambda counts: max(counts, key=lambda p: (counts[p], p)),
        ),
        Diagnosis.like(
            "least_frequent",
            "this is the least frequent pair: merge the most frequent one",
            lambda counts: min(counts, key=lambda p: (counts[p], p)),
        ),
    ),
)

EXERCISES = [COUNT_PAIRS, MERGE_PAIR, MOST_FREQUENT_PAIR]
