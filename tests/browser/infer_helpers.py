"""Steps the in-page model tests (test_infer_ch08/09/10) share: load a model, start a widget."""

from __future__ import annotations

import time


def open_with_model(driver, url: str, model: str):
    """``driver`` on ``url`` with ``model``'s weights loaded (again if a test left the page)."""
    loaded = f"return !!(window.bookModels && bookModels.models.{model});"
    if driver.current_url != url or not driver.execute_script(loaded):
        driver.get(url)
        result = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"bookModels.load('{model}')"
            ".then(() => done('ok'), (e) => done('error: ' + e.message));"
        )
        assert result == "ok", result
    return driver


def start_widget(driver, model: str, ready: str, timeout: float):
    """Press ``model``'s start button and wait until its widget state has the field ``ready``."""
    driver.execute_script(
        f"document.querySelector('div.book-infer[data-model={model}] button.bi-start')?.click()"
    )
    deadline = time.monotonic() + timeout
    while not driver.execute_script(f"return !!(bookModels.widgets.{model} || {{}}).{ready}"):
        assert time.monotonic() < deadline, f"the {model} widget did not start"
        time.sleep(0.1)
