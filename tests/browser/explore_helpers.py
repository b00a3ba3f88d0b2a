"""Drive the book's interactive figures (transformer_intro.explore) from selenium.

Figures are found by their name (the myst-nb figure name passed as ``name=``):
``point_at(driver, "fig-ch03-explore", 3)`` points at output 3 (a token, or patch 3 with 0 the
class token), ``read_values(driver, "fig-ch03-explore")`` returns the weights the page shows for
it over the inputs n', in input order, as floats (the value stored in the page, which it prints to
3 decimals). ``select`` picks a layer or head, ``set_temperature`` moves the slider.

In a test file under tests/browser: ``from explore_helpers import point_at, read_values`` (pytest
puts the folder on ``sys.path``).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = [
    "assert_shows_column",
    "assert_shows_columns",
    "matches",
    "point_at",
    "read_labels",
    "read_values",
    "select",
    "set_temperature",
    "wait_for_figure",
]


def _css(name: str) -> str:
    return f'div.ti-explore[data-explore-name="{name}"]'


def matches(shown, expected) -> bool:
    """Whether the numbers a figure shows are ``expected``, as the page prints them (3 decimals).

    Either every number rounds to the same 3 decimals, or each is within 5e-4 (a value on the
    edge of a rounding step may round either way after the page's quantisation).
    """
    return len(shown) == len(expected) and bool(
        np.all(np.round(np.asarray(shown), 3) == np.round(np.asarray(expected), 3))
        or np.allclose(shown, expected, atol=5e-4)
    )


def wait_for_figure(driver, figure_name: str, timeout: float = 20.0):
    """The figure's root element, once explore.js has turned it into a widget.

    One round trip to the browser when the figure is ready: the script returns the element
    itself (each WebDriver command costs milliseconds, and the figure tests make thousands).
    """
    deadline = time.monotonic() + timeout
    while True:
        state = driver.execute_script(
            "const r = document.querySelector(arguments[0]);"
            "if (!r) return 'missing';"
            "if (r.getAttribute('data-explore-error')) return 'error: ' +"
            " r.getAttribute('data-explore-error');"
            "return r.getAttribute('data-explore-ready') ? r : 'waiting';",
            _css(figure_name),
        )
        if not isinstance(state, str):
            return state
        if state.startswith("error") or time.monotonic() > deadline:
            raise AssertionError(f"interactive figure {figure_name!r}: {state}")
        time.sleep(0.05)


def point_at(driver, figure_name: str, index: int) -> None:
    """Move the pointer onto output ``index`` of the figure (and click it, as a reader might)."""
    from selenium.webdriver.common.action_chains import ActionChains

    root = wait_for_figure(driver, figure_name)
    target = driver.execute_script(
        "const t = arguments[0].querySelector(arguments[1]);"
        "if (t) t.scrollIntoView({block: 'center'});"
        "return t;",
        root,
        f'.ti-out[data-index="{int(index)}"]',
    )
    if target is None:
        raise IndexError(f"figure {figure_name!r} has no output {index}")
    ActionChains(driver).move_to_element(target).click().perform()


def _shown(driver, figure_name: str, which: str) -> list:
    """``[stored value, printed text]`` of each number in a panel, in one round trip."""
    root = wait_for_figure(driver, figure_name)
    panel = {"weights": ".ti-weights", "class": ".ti-cls-weights", "next": ".ti-next"}[which]
    return driver.execute_script(
        "return [...arguments[0].querySelectorAll(arguments[1] + ' .ti-value')]"
        ".map((e) => [e.getAttribute('data-value'), e.textContent]);",
        root,
        panel,
    )


def read_values(driver, figure_name: str, which: str = "weights") -> list[float]:
    """The numbers the figure shows now.

    Args:
        which: ``"weights"`` (the pointed output's weights over the inputs, in input order; for an
            image figure the class token first, then the patches), ``"class"`` (an image figure's
            class-token panel) or ``"next"`` (next-token probabilities, most likely first).
    """
    return _checked_values(_shown(driver, figure_name, which))


def _checked_values(pairs: list) -> list[float]:
    values = [float(value) for value, _ in pairs]
    # the printed 3-decimal number must be the stored value, rounded
    for value, text in zip(values, (float(text) for _, text in pairs)):
        assert abs(value - text) <= 5.1e-4, (value, text)
    return values


def assert_shows_column(driver, figure_name: str, n: int, expected, wrong) -> None:
    """Point at output ``n``: the page must show the weights ``expected``, and not ``wrong``.

    ``expected`` is the column of the selected head's ``A`` for output ``n``; ``wrong`` is the
    negative control (another output's column, or another head's), which the page must not match.
    """
    point_at(driver, figure_name, n)
    _assert_column(figure_name, n, read_values(driver, figure_name), expected, wrong)


def _assert_column(figure_name: str, n: int, shown, expected, wrong) -> None:
    assert matches(shown, expected), (figure_name, n, shown, list(expected))
    assert not matches(shown, wrong), (figure_name, n, "matches the negative control")


# For each output index: the event a reader's pointer sends as it enters the output (the
# figure's own handler redraws at once), then the weights panel's [stored value, printed text].
_POINT_AND_READ_EACH = """
const [root, indices] = arguments;
return indices.map((i) => {
  const target = root.querySelector(`.ti-out[data-index="${i}"]`);
  if (!target) return null;
  target.dispatchEvent(new MouseEvent("mouseenter"));
  return [...root.querySelectorAll(".ti-weights .ti-value")]
    .map((e) => [e.getAttribute("data-value"), e.textContent]);
});
"""


def assert_shows_columns(driver, figure_name: str, indices, expected, wrong) -> None:
    """:func:`assert_shows_column` for each output in ``indices``, with the column of each.

    The first output is pointed at with the real pointer, as a reader does; the rest through the
    page's own handler for that pointer, in one round trip to the browser (a pointer's move and
    click cost about half a second each in WebDriver, and the figure tests check hundreds).
    """
    indices = [int(i) for i in indices]
    assert len(indices) == len(expected) == len(wrong) > 0
    assert_shows_column(driver, figure_name, indices[0], expected[0], wrong[0])
    root = wait_for_figure(driver, figure_name)
    panels = driver.execute_script(_POINT_AND_READ_EACH, root, indices[1:])
    for n, pairs, column, other in zip(indices[1:], panels, expected[1:], wrong[1:]):
        if pairs is None:
            raise IndexError(f"figure {figure_name!r} has no output {n}")
        _assert_column(figure_name, n, _checked_values(pairs), column, other)


def read_labels(driver, figure_name: str) -> list[str]:
    """The symbols of the next-token rows, in the order shown."""
    root = wait_for_figure(driver, figure_name)
    return driver.execute_script(
        "return [...arguments[0].querySelectorAll('.ti-next .ti-bar')]"
        ".map((e) => e.querySelector('.ti-sym').textContent);",
        root,
    )


def select(driver, figure_name: str, *, layer: int | None = None, head: int | str | None = None):
    """Choose a layer and/or a head (an index, or ``"rollout"`` for an image figure)."""
    root = wait_for_figure(driver, figure_name)
    for cls, value in (("ti-layer", layer), ("ti-head", head)):
        if value is None:
            continue
        driver.execute_script(
            "const s = arguments[0].querySelector('select.' + arguments[1]);"
            "s.value = arguments[2]; s.dispatchEvent(new Event('change'));",
            root,
            cls,
            str(value),
        )


def set_temperature(driver, figure_name: str, temperature: float) -> None:
    root = wait_for_figure(driver, figure_name)
    driver.execute_script(
        "const s = arguments[0].querySelector('input.ti-temp');"
        "s.value = arguments[1]; s.dispatchEvent(new Event('input'));",
        root,
        str(temperature),
    )
