"""Byte-level BPE with a fixed vocabulary and merge list, as GPT-2, Llama 3 and SmolLM2 ship it.

Encoding a string: split off the special tokens (``<|im_start|>`` ...), cut the rest into chunks
with a regular expression (words with their leading space, numbers, punctuation runs, spaces), map
each chunk's UTF-8 bytes to printable stand-in characters (GPT-2's table, so that the space byte is
``Ġ``), then inside each chunk apply the merges: repeatedly join the adjacent pair that comes first
in the merge list, until no adjacent pair is in it. Each resulting piece is a vocabulary entry.
Decoding maps ids to their stand-in strings and those back to bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import regex

# Hugging Face's ByteLevel pre-tokeniser pattern (GPT-2's, with unpossessive quantifiers).
BYTE_LEVEL_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def bytes_to_characters() -> dict[int, str]:
    """GPT-2's printable stand-in character for each of the 256 bytes."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class ByteLevelBPE:
    """A pretrained byte-level BPE tokeniser: vocabulary, merges, special tokens, chat template.

    Args:
        tokens: the vocabulary as stand-in strings, token id = position.
        merges: the merge list, earliest first, each ``"a b"`` or ``(a, b)``.
        special_tokens: strings matched literally before any splitting (their ids are looked up
            in ``tokens``).
        pattern: the pre-splitting regular expression.
        chat_template: a Jinja template turning a list of messages into a prompt.
        eos_token: the token that ends an answer.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        merges: Iterable[str | tuple[str, str]],
        *,
        special_tokens: Iterable[str] = (),
        pattern: str = BYTE_LEVEL_PATTERN,
        chat_template: str | None = None,
        eos_token: str | None = None,
    ):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        if len(self.ids) != len(self.tokens):
            raise ValueError("the vocabulary holds a token twice")
        pairs = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(pairs)}
        self.special_tokens = [s for s in special_tokens]
        missing = [s for s in self.special_tokens if s not in self.ids]
        if missing:
            raise ValueError(f"special tokens not in the vocabulary: {missing}")
        # Longest first, so that no special token is cut short by a prefix of another.
        ordered = sorted(self.special_tokens, key=len, reverse=True)
        self._special_split = (
            regex.compile("(" + "|".join(regex.escape(s) for s in ordered) + ")")
            if ordered
            else None
        )
        self.pattern = regex.compile(pattern)
        self.chat_template = chat_template
        self.eos_token = eos_token
        self._to_char = bytes_to_characters()
        self._to_byte = {c: b for b, c in self._to_char.items()}
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def eos_id(self) -> int | None:
        return None if self.eos_token is None else self.ids[self.eos_token]

    def _merge(self, chunk: str) -> list[int]:
        """One pre-split chunk (stand-in characters) to token ids, by the merge list."""
        if chunk in self._cache:
            return self._cache[chunk]
        pieces = list(chunk)
        while len(pieces) > 1:
            pairs = list(zip(pieces[:-1], pieces[1:], strict=True))
            best = min(pairs, key=lambda pair: self.ranks.get(pair, len(self.ranks)))
            if best not in self.ranks:
                break
            # Join every occurrence of the earliest-learned pair, left to right.
            first, second = best
            merged, i = [], 0
            while i < len(pieces):
                if i + 1 < len(pieces) and pieces[i] == first and pieces[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(pieces[i])
                    i += 1
            pieces = merged
        try:
            ids = [self.ids[p] for p in pieces]
        except KeyError as error:
            raise ValueError(f"piece {error} of chunk {chunk!r} is not in the vocabulary") from None
        self._cache[chunk] = ids
        return ids

    def encode(self, text: str, *, specials: bool = True) -> list[int]:
        """Token ids of ``text``; ``specials=False`` encodes special tokens as plain text."""
        parts = (
            self._special_split.split(text)
            if specials and self._special_split is not None
            else [text]
        )
        ids: list[int] = []
        for i, part in enumerate(parts):
            if i % 2 == 1:  # the split pattern has one group: odd parts are special tokens
                ids.append(self.ids[part])
                continue
            for chunk in self.pattern.findall(part):
                ids.extend(self._merge("".join(self._to_char[b] for b in chunk.encode("utf-8"))))
        return ids

    def decode(self, ids: Iterable[int], *, skip_specials: bool = False) -> str:
        """The text of a list of ids (invalid UTF-8, e.g. half a character, becomes U+FFFD)."""
        special = set(self.special_tokens)
        out = bytearray()
        for i in ids:
            token = self.tokens[int(i)]
            if token in special:
                if not skip_specials:
                    out.extend(token.encode("utf-8"))
                continue
            out.extend(self._to_byte[c] for c in token)
        return out.decode("utf-8", errors="replace")

    def apply_chat_template(
        self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        """The prompt the model was fine-tuned on, from ``[{"role": ..., "content": ...}, ...]``."""
        if self.chat_template is None:
            raise ValueError("this tokeniser has no chat template")
        import jinja2

        template = jinja2.Environment().from_string(self.chat_template)
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt)
