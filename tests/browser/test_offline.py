"""Nothing leaves the machine: every request a page makes goes to 127.0.0.1, file:// or data:.

Each page of the built book with interactive figures is loaded from the local server and its
figures are used (point at an output, switch head, move the temperature slider); every request
Chromium sends meanwhile (its performance log, Network.requestWillBeSent) must stay local. (Every
page's plain load is checked the same way, to this server only, by test_pages.py.) The same holds
for a chapter opened from file://, whose figure must still work. The check can fail: the same
chapter with one added CDN script is caught.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from explore_helpers import point_at, read_values, select, set_temperature, wait_for_figure
from test_pages import PAGES

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "chrome-extension:", "devtools:")
CHAPTER = "book/03_multi_head_attention.html"


def non_local(urls: list[str]) -> list[str]:
    """The URLs among ``urls`` that leave 127.0.0.1 (or file://, data:, ...)."""
    return [
        url
        for url in urls
        if not (url.startswith("http://127.0.0.1:") or url.startswith(LOCAL_SCHEMES))
    ]


def requests_while(driver, url: str, use_figures: bool = True) -> list[str]:
    """Load ``url``, use its interactive figures, and return every URL the browser requested."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # forget earlier pages
    driver.get(url)
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    if use_figures:
        names = driver.execute_script(
            "return [...document.querySelectorAll('div.ti-explore')]"
            ".map(e => e.getAttribute('data-explore-name'))"
        )
        for name in names:
            wait_for_figure(driver, name)
            point_at(driver, name, 1)
            select(driver, name, head=0)
            if driver.execute_script(
                "return !!document.querySelector(arguments[0])",
                f'div.ti-explore[data-explore-name="{name}"] input.ti-temp',
            ):
                set_temperature(driver, name, 0.5)
            assert read_values(driver, name), f"{name}: no values shown"
    time.sleep(0.5)  # late requests (fonts, lazy images)
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_detector_non_local():
    assert non_local(["https://cdn.jsdelivr.net/x.js", "http://127.0.0.1:8000/a.js"]) == [
        "https://cdn.jsdelivr.net/x.js"
    ]
    assert non_local(["http://localhost.evil.com/", "http://127.0.0.1.evil.com/"]) == [
        "http://localhost.evil.com/",
        "http://127.0.0.1.evil.com/",
    ]
    assert non_local(["file:///tmp/a.html", "data:,", "http://127.0.0.1:1/"]) == []


# An interactive figure's element, as the built HTML carries it.
FIGURE = re.compile(r'class="(?:[^"]*\s)?ti-explore(?:\s[^"]*)?"')


def has_figures(html_dir: Path, page: str) -> bool:
    return FIGURE.search((html_dir / page).read_text(encoding="utf8")) is not None


@pytest.mark.browser  # it reads the built book
def test_the_pages_with_figures_are_found(html_dir):
    assert has_figures(html_dir, CHAPTER)
    assert not has_figures(html_dir, "book/00_jax_and_equinox.html")


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_stays_local(page, html_dir, book_server, driver):
    # A page without figures is loaded once, by test_layout.py::test_page, whose check of every
    # request (to this server only) is stricter than this one: loading it again adds nothing.
    if not has_figures(html_dir, page):
        pytest.skip("no interactive figure: test_layout.py::test_page checks its requests")
    urls = requests_while(driver, book_server.url + page)
    assert urls, "the performance log recorded no request at all: is the check working?"
    assert not non_local(urls), f"{page} requested: {non_local(urls)}"


@pytest.mark.browser
def test_chapter_from_file_works_offline(html_dir, driver):
    urls = requests_while(driver, (html_dir / CHAPTER).as_uri())
    assert urls and not non_local(urls), non_local(urls)
    assert all(url.startswith(LOCAL_SCHEMES) for url in urls), urls
    assert driver.execute_script("return document.querySelectorAll('div.ti-explore').length") >= 1


@pytest.mark.browser
def test_a_cdn_script_is_caught(html_dir, driver, serve_dir, tmp_path):
    """The real chapter plus one CDN script: the check must report the CDN."""
    for folder in ("_static", "_images"):
        os.symlink(html_dir / folder, tmp_path / folder)
    (tmp_path / "book").mkdir()
    html = (html_dir / CHAPTER).read_text(encoding="utf8")
    cdn = "https://cdn.jsdelivr.net/npm/left-pad@1.3.0/index.js"
    html = html.replace("</head>", f'<script src="{cdn}"></script></head>', 1)
    (tmp_path / CHAPTER).write_text(html, encoding="utf8")
    with serve_dir(tmp_path) as server:
        urls = requests_while(driver, server.url + CHAPTER)
    assert cdn in non_local(urls), urls


@pytest.mark.browser
def test_no_launch_links_by_default(html_dir):
    for page in PAGES:
        html = (html_dir / page).read_text(encoding="utf8")
        for service in ("mybinder.org", "colab.research.google.com"):
            assert service not in html, f"{page} links {service} although repository.url is empty"


@pytest.mark.browser
def test_launch_buttons_once_published(tmp_path):
    """With repository.url set, a chapter links its notebook on Binder and Colab."""
    import shutil
    import subprocess
    import sys

    import yaml

    repo = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((repo / "_config.yml").read_text(encoding="utf8"))
    assert config["repository"]["url"] == "", "the default must stay off"
    config["repository"]["url"] = "https://github.com/OWNER/REPO"
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf8")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/01_tokens\n", encoding="utf8")
    for folder in ("_interactive", "_mathjax", "scripts"):
        os.symlink(repo / folder, tmp_path / folder)
    shutil.copy(repo / "references.bib", tmp_path)
    (tmp_path / "book").mkdir()
    shutil.copy(repo / "book" / "01_tokens.ipynb", tmp_path / "book")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jupyter_book), "build", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (tmp_path / "_build" / "html" / "book" / "01_tokens.html").read_text(encoding="utf8")
    notebook = "OWNER/REPO/main"
    assert f"https://mybinder.org/v2/gh/{notebook}?urlpath=lab/tree/book/01_tokens.ipynb" in html
    assert "colab.research.google.com/github/OWNER/REPO/blob/main/book/01_tokens.ipynb" in html


def _softmax_columns(scores):
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    return e / e.sum(axis=-2, keepdims=True)


@pytest.mark.browser
def test_generated_figures_from_file(html_dir, driver, tmp_path):
    """Both kinds of figure, written by transformer_intro.explore, work from file:// alone.

    Token figure: weights per layer and head, and the next-token softmax at a temperature,
    recomputed here. Image figure: a patch's column, the class token's, and the rollout.
    """
    from transformer_intro.explore import image_attention_figure, token_attention_figure

    rng = np.random.default_rng(0)
    A = _softmax_columns(3 * rng.normal(size=(2, 3, 6, 5)))  # L=2, H=3, N_in=6, N_out=5
    logits = 2 * rng.normal(size=(5, 7))
    tokens = token_attention_figure(
        list("abcdef"),
        list("vwxyz"),
        A,
        next_token={"logits": logits, "vocabulary": list("ABCDEFG")},
        name="fig-test-tokens",
    )
    B = _softmax_columns(rng.normal(size=(2, 2, 17, 17)))  # 4x4 patches + class token
    R = _softmax_columns(rng.normal(size=(17, 17)))
    image = image_attention_figure(rng.uniform(size=(16, 16)), 4, B, rollout=R, name="fig-test-img")
    static = html_dir / "_static"
    page = tmp_path / "figures.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<link rel="stylesheet" href="{(static / "explore.css").as_uri()}">'
        f'<script src="{(static / "explore.js").as_uri()}"></script></head>'
        f"<body>{tokens.to_html()}{image.to_html()}</body></html>",
        encoding="utf8",
    )
    driver.get(page.as_uri())

    def close(shown, expected):
        return len(shown) == len(expected) and np.allclose(shown, expected, atol=5e-4)

    select(driver, "fig-test-tokens", layer=1, head=2)
    point_at(driver, "fig-test-tokens", 3)
    shown = read_values(driver, "fig-test-tokens")
    assert close(shown, A[1, 2, :, 3]) and not close(shown, A[1, 2, :, 2])
    set_temperature(driver, "fig-test-tokens", 0.5)
    p = np.exp(logits[3] / 0.5 - (logits[3] / 0.5).max())
    p /= p.sum()
    assert close(read_values(driver, "fig-test-tokens", "next"), np.sort(p)[::-1])

    point_at(driver, "fig-test-img", 6)  # patch 6: row 2, column 2
    select(driver, "fig-test-img", layer=0, head=1)
    shown = read_values(driver, "fig-test-img")
    assert close(shown, B[0, 1, :, 6]) and not close(shown, B[0, 1, :, 7])
    assert close(read_values(driver, "fig-test-img", "class"), B[0, 1, :, 0])
    select(driver, "fig-test-img", head="rollout")
    assert close(read_values(driver, "fig-test-img"), R[:, 6])
