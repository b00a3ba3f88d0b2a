"""A stored byte-level BPE vocabulary as chapter 13's tokeniser.

The tokeniser is :class:`~transformer_intro.bpe.BytePairEncoding`.

Hugging Face and GGUF files store a byte-level BPE tokeniser as a vocabulary (each token written
in GPT-2's printable stand-in characters, so that the space byte is ``Ġ``, its id its position)
and a merge list (``"Ġ t"``, earliest first). Both are the same object as chapter 13's
tokeniser: the single bytes, then each merge's joined token in merge order, encoded by the rule of
:meth:`BytePairEncoding.encode_chunk`. Only two things differ from a tokeniser trained in the
book: the vocabulary may number its special tokens first (``ids``), and it may lack a few bytes
its training text never had. A chat model adds a template that lays out a conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..bpe import BytePairEncoding, gpt2_byte_characters

__all__ = ["BYTE_LEVEL_PATTERN", "ChatTokeniser", "from_vocabulary"]

# Hugging Face's ByteLevel pre-tokeniser pattern (GPT-2's, with plain instead of possessive
# quantifiers, and trailing whitespace kept in one chunk): SmolLM2's pre-splitting rule.
BYTE_LEVEL_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


class ChatTokeniser(BytePairEncoding):
    """A :class:`BytePairEncoding` that also knows its model's chat template and end token."""

    def __init__(
        self,
        token_bytes: list[bytes],
        *,
        chat_template: str | None = None,
        eos_token: str | None = None,
        **options,
    ):
        """Build the tokeniser and check the end token.

        Args:
            token_bytes: as for :class:`BytePairEncoding`.
            chat_template: a Jinja template turning a list of messages into a prompt.
            eos_token: the special token that ends an answer.
            **options: ``pattern``, ``special_tokens``, ``merges``, ``ids``: as for
                :class:`BytePairEncoding`.

        Raises:
            ValueError: when ``eos_token`` is not one of the special tokens.
        """
        super().__init__(token_bytes, **options)
        if eos_token is not None and eos_token not in self.special_tokens:
            raise ValueError(f"the end token {eos_token!r} is not one of the special tokens")
        self.chat_template = chat_template
        self.eos_token = eos_token

    @property
    def eos_id(self) -> int | None:
        """The id of the token that ends an answer."""
        return None if self.eos_token is None else self.special_tokens[self.eos_token]

    def apply_chat_template(
        self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        """The prompt the model was fine-tuned on, from ``[{"role": ..., "content": ...}, ...]``.

        The template runs in Jinja's sandbox, as in transformers.

        Raises:
            ValueError: when the tokeniser has no chat template.
            jinja2.exceptions.SecurityError: when the template reaches for Python's internals.
        """
        if self.chat_template is None:
            raise ValueError("this tokeniser has no chat template")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        # The template comes from the model's file, which anyone may have written, and plain
        # Jinja lets a template reach Python's internals (``''.__class__.__mro__``...). The
        # sandbox refuses that with a SecurityError; the options are transformers' for the
        # same templates, so that the prompt is the one the model was fine-tuned on.
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        template = environment.from_string(self.chat_template)
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt)


def from_vocabulary(
    tokens: Sequence[str],
    merges: Iterable[str | tuple[str, str] | list[str]],
    *,
    special_tokens: Iterable[str],
    pattern: str = BYTE_LEVEL_PATTERN,
    **options,
) -> ChatTokeniser:
    """The tokeniser of a stored vocabulary (stand-in strings, id = position) and merge list.

    Args:
        tokens: the vocabulary, ``tokens[i]`` the token with id i.
        merges: the merge list, earliest first, each ``"a b"``, ``(a, b)`` or ``[a, b]`` (as
            newer ``tokenizer.json`` files store them).
        special_tokens: the tokens matched literally in text and never merged.
        pattern: the pre-splitting regular expression.
        **options: ``chat_template`` and ``eos_token``.

    Raises:
        ValueError: a merge's parts are not earlier tokens, or a token is neither a single byte,
            a merge's result nor special.
    """
    byte_of = gpt2_byte_characters()
    specials = {t: i for i, t in enumerate(tokens) if t in set(special_tokens)}
    ids_of = {t: i for i, t in enumerate(tokens)}
    ordinary = [t for t in tokens if t not in specials]
    singles = [t for t in ordinary if len(t) == 1]
    position = {t: n for n, t in enumerate(singles)}
    token_bytes = [bytes([byte_of[t]]) for t in singles]
    pairs = []
    for merge in merges:
        first, second = merge.split(" ") if isinstance(merge, str) else merge
        if first not in position or second not in position:
            raise ValueError(f"the merge {first!r} + {second!r} joins a token not made yet")
        joined = first + second
        position[joined] = len(token_bytes)
        token_bytes.append(token_bytes[position[first]] + token_bytes[position[second]])
        pairs.append((position[first], position[second]))
    orphans = [t for t in ordinary if t not in position]
    if orphans:
        raise ValueError(f"tokens that are neither a byte nor a merge: {orphans[:5]}")
    by_position = sorted(position, key=position.get)
    return ChatTokeniser(
        token_bytes,
        pattern=pattern,
        special_tokens=specials,
        merges=pairs,
        ids=[ids_of[t] for t in by_position],
        **options,
    )
