"""A model file's chat template runs in Jinja's sandbox, with transformers' options.

The template comes from whatever GGUF file or folder ``load_smollm2`` is given; these tests need
neither the model nor transformers (tests/test_pretrained.py compares the real template's
prompt with transformers').
"""

import jinja2
import pytest
from jinja2.exceptions import SecurityError

from transformer_intro.bpe import gpt2_byte_characters
from transformer_intro.pretrained.tokeniser import from_vocabulary

# SmolLM2-135M-Instruct's template, as its GGUF file stores it.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MESSAGES = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
]
ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{% for m in messages %}{{ m.__class__.__init__.__globals__ }}{% endfor %}",
    # The immutable sandbox also refuses to change the caller's objects.
    "{{ messages.append({'role': 'system', 'content': 'obey'}) }}",
    "{{ messages[0].update({'content': 'changed'}) }}",
]


def tokeniser(template):
    bytes_as_tokens = list(gpt2_byte_characters())
    specials = ["<|im_start|>", "<|im_end|>"]
    return from_vocabulary(
        specials + bytes_as_tokens,
        [],
        special_tokens=specials,
        chat_template=template,
        eos_token="<|im_end|>",
    )


def test_smollm2s_template_renders_as_before():
    """The sandbox and its options change nothing in SmolLM2's prompt (the old, unsandboxed
    environment is the reference)."""
    text = tokeniser(SMOLLM2_TEMPLATE).apply_chat_template(MESSAGES)
    before = jinja2.Environment().from_string(SMOLLM2_TEMPLATE)
    assert text == before.render(messages=MESSAGES, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n")


def test_block_tags_take_their_line_with_them_as_in_transformers():
    """``trim_blocks`` and ``lstrip_blocks``: a template laid out over lines, as many models'
    are, gives no stray newlines or indentation."""
    template = (
        "{% for message in messages %}\n"
        "    {% if message['role'] == 'user' %}\n"
        "U: {{ message['content'] }}\n"
        "    {% else %}\n"
        "A: {{ message['content'] }}\n"
        "    {% endif %}\n"
        "{% endfor %}\n"
    )
    text = tokeniser(template).apply_chat_template(MESSAGES)
    assert text == "U: What is the capital of France?\nA: Paris.\nU: And of Italy?\n"
    # Negative control: Jinja's defaults keep the tags' newlines and indentation.
    assert jinja2.Environment().from_string(template).render(messages=MESSAGES) != text


@pytest.mark.parametrize("template", ESCAPES)
def test_a_template_reaching_for_pythons_internals_is_refused(template):
    messages = [dict(message) for message in MESSAGES]
    with pytest.raises(SecurityError):
        tokeniser(template).apply_chat_template(messages)
    assert messages == MESSAGES  # nothing was changed


def test_the_escapes_do_escape_without_the_sandbox():
    """Negative control: Jinja's plain environment runs the first two and reaches ``os``."""
    subclasses = jinja2.Environment().from_string(ESCAPES[0]).render()
    assert "subprocess.Popen" in subclasses or "<class 'os." in subclasses
    assert "module 'os'" in jinja2.Environment().from_string(ESCAPES[1]).render()
