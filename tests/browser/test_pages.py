"""Load every page of the built book in headless Chromium and check what a reader would see.

The checks are here; the test that runs them on each page, ``test_page``, is in test_layout.py,
where they share the page's load at 1280 px with the layout checks.

Run with ``make browser`` (builds the book first) or
``.venv/bin/python -m pytest tests/browser --run-browser`` after ``make book``.

A page fails if
- math is left as raw TeX: a ``.math`` element that MathJax did not typeset, a MathJax error, or
  TeX source (``$$``, ``\\begin{``, ``\\frac``, ...) in the visible text outside code;
- an image does not load;
- a link, image, script or stylesheet points to a file that was not built, a ``#anchor`` does
  not exist in its target page, or a Sphinx cross-reference is unresolved;
- a chapter built from a notebook does not offer its ``.ipynb`` for download;
- the browser console reports an error, or the page requests anything outside the local server.
With ``BOOK_SCREENSHOTS=1`` a full-page screenshot of each page is saved to
tests/browser/screenshots/, for a person to look through (no test reads them).

The ``test_detector_*`` tests show that the checks can fail: they feed deliberately broken
pages to the same functions (the browser one needs --run-browser too).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
HTML_DIR = Path(os.environ.get("BOOK_HTML_DIR", REPO / "_build" / "html")).resolve()
TOC = REPO / "_toc.yml"

# Drawing each page whole (up to 12000 px tall) took 45 of this file's 77 s: only on request.
FULL_PAGE_SCREENSHOTS = os.environ.get("BOOK_SCREENSHOTS") == "1"

# Generated pages that are not part of the book's content (index.html only redirects to the root).
NOT_PAGES = {"genindex.html", "search.html", "index.html", "py-modindex.html"}
NOT_PAGE_DIRS = {"_static", "_sources", "_images", "_downloads", "_panels_static"}


# ---------------------------------------------------------------------------------------------
# Which pages


def toc_files(toc_path: Path = TOC) -> list[str]:
    """Every document of the table of contents (``root`` and each ``file``), in toc order."""
    import yaml

    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    found.append(node[key])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc)
    # drop a suffix if one was written, keep the order, drop duplicates
    docs = [re.sub(r"\.(md|ipynb|rst)$", "", f) for f in found]
    return list(dict.fromkeys(docs))


def book_pages() -> list[str]:
    """The pages to test: every toc document, plus any other content page that was built."""
    pages = [f"{doc}.html" for doc in toc_files()]
    if HTML_DIR.is_dir():
        for path in sorted(HTML_DIR.rglob("*.html")):
            rel = path.relative_to(HTML_DIR).as_posix()
            if rel in NOT_PAGES or rel.split("/")[0] in NOT_PAGE_DIRS:
                continue
            if rel not in pages:
                pages.append(rel)
    return pages


PAGES = book_pages()


def source_of(doc: str) -> Path | None:
    for suffix in (".ipynb", ".md", ".rst"):
        if (REPO / (doc + suffix)).is_file():
            return REPO / (doc + suffix)
    return None


# ---------------------------------------------------------------------------------------------
# Static checks on the HTML files


class _PageParser(HTMLParser):
    """Collects the ids (anchor targets) and the local URLs referenced by one HTML page."""

    URL_ATTRS = {
        "a": "href",
        "img": "src",
        "script": "src",
        "link": "href",
        "source": "src",
        "iframe": "src",
    }
    IGNORED_LINK_RELS = {"canonical", "alternate", "preconnect", "dns-prefetch"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        attr = self.URL_ATTRS.get(tag)
        if attr and attrs.get(attr) is not None:
            if tag == "link" and set((attrs.get("rel") or "").split()) & self.IGNORED_LINK_RELS:
                return
            self.urls.append((tag, attrs[attr]))

    handle_startendtag = handle_starttag


def _parse(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf8", errors="replace"))
    parser.close()
    return parser


EXTERNAL = re.compile(
    r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)"
)  # http:, https:, mailto:, data:, javascript:, //host


def find_broken_links(root: Path, page: str) -> list[str]:
    """Local links of ``root/page`` that are broken.

    Those whose file does not exist or whose #anchor is not in its target.
    """
    root = Path(root).resolve()
    source = root / page
    parsed = _parse(source)
    id_cache: dict[Path, set[str]] = {source: parsed.ids}
    problems = []
    for tag, url in parsed.urls:
        url = url.strip()
        if not url or url == "#" or EXTERNAL.match(url):
            continue
        parts = urlsplit(url)
        if parts.path:
            target = (source.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
        else:
            target = source
        if root not in target.parents and target != root:
            problems.append(f"<{tag}> {url!r} points outside the book")
            continue
        if not target.is_file():
            problems.append(f"<{tag}> {url!r}: {target.relative_to(root)} does not exist")
            continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == ".html":
            if target not in id_cache:
                id_cache[target] = _parse(target).ids
            if fragment not in id_cache[target]:
                problems.append(
                    f"<{tag}> {url!r}: no id {fragment!r} in {target.relative_to(root)}"
                )
    return problems


# TeX that must never reach the reader: display/inline dollars, \( \) \[ \], environments, commands.
RAW_TEX = re.compile(
    r"\$\$"
    r"|\\begin\{|\\end\{"
    r"|\\[()\[\]]"
    r"|\\[a-zA-Z]{2,}"
    r"|(?<![\w$])\$[^\s$](?:[^$\n]{0,200}[^\s$\\])?\$(?![\w$])"
)
UNRESOLVED = re.compile(r"\?\?")


def find_raw_tex(text: str) -> list[str]:
    """Snippets of ``text`` (visible text outside code) that look like TeX nobody typeset."""
    found = []
    for match in RAW_TEX.finditer(text):
        start, end = max(match.start() - 30, 0), min(match.end() + 30, len(text))
        found.append(text[start:end].replace("\n", " "))
    return found


# ---------------------------------------------------------------------------------------------
# Browser checks

WAIT_FOR_MATHJAX = r"""
const done = arguments[arguments.length - 1];
const started = Date.now();
const settle = (state) => {
  const fonts = document.fonts ? document.fonts.ready : Promise.resolve();
  fonts.then(() => done(state), () => done(state));
};
const hasScript = !!document.querySelector('script[src*="tex-mml-chtml"], script[src*="mathjax"]');
(function poll() {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    mj.startup.promise.then(() => settle("typeset"), (e) => settle("mathjax failed: " + e));
  } else if (!hasScript) {
    settle("no mathjax");
  } else if (Date.now() - started > 20000) {
    settle("mathjax did not start");
  } else {
    setTimeout(poll, 50);
  }
})();
"""

INSPECT = r"""
const CODE = "pre, code, kbd, samp, script, style, noscript, textarea, template, mjx-container, .highlight";
const short = (s) => (s || "").replace(/\s+/g, " ").trim().slice(0, 160);
const visible = (el) => el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : !!el.offsetParent;

const untypeset = [...document.querySelectorAll(".math")]
  .filter((el) => !el.closest(CODE) && !el.querySelector("mjx-container"))
  .map((el) => short(el.textContent));
const mathErrors = [...document.querySelectorAll("mjx-merror, mjx-container [data-mjx-error]")]
  .map((el) => short(el.getAttribute("data-mjx-error") || el.textContent));
const undefinedMacros = [...document.querySelectorAll('mjx-assistive-mml mtext[mathcolor="red"]')]
  .map((el) => short(el.textContent));

const parts = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const el = node.parentElement;
  if (!el || el.closest(CODE) || !visible(el)) continue;
  parts.push(node.nodeValue);
}

const brokenImages = [...document.images]
  .filter((img) => !(img.complete && img.naturalWidth > 0))
  .map((img) => img.getAttribute("src"));
const unresolvedRefs = [...document.querySelectorAll(".xref, .pending_xref")]
  .filter((el) => !el.closest("a[href]"))
  .map((el) => short(el.textContent));

return {
  mathElements: document.querySelectorAll(".math").length,
  containers: document.querySelectorAll("mjx-container").length,
  untypeset, mathErrors, undefinedMacros, brokenImages, unresolvedRefs,
  text: parts.join("\n"),
  height: Math.ceil(Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)),
};
"""  # noqa: E501 (JavaScript: lines kept whole)

IMAGES_SETTLED = r"""
document.querySelectorAll('img[loading="lazy"]').forEach((img) => { img.loading = "eager"; });
return [...document.images].every((img) => img.complete);
"""


def _is_local(url: str, base_url: str) -> bool:
    return url.startswith(base_url) or url.split(":", 1)[0] in {
        "data",
        "blob",
        "about",
        "chrome",
        "devtools",
    }


def save_full_page_screenshot(driver, path: Path, height: int) -> None:
    """Render the whole page (up to 12000 px) by emulating a window as tall as the page."""
    width = driver.execute_script("return window.innerWidth") or 1280
    height = min(max(int(height), 600), 12000)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        time.sleep(0.3)  # let the layout settle at the new size
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path.write_bytes(base64.b64decode(shot["data"]))


def check_in_browser(driver, base_url: str, page: str, screenshot: Path | None = None) -> list[str]:
    """Load ``base_url + page`` and return every problem a reader would notice."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what earlier pages left behind
    driver.get_log("performance")
    driver.get(base_url + page)
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    mathjax = driver.execute_async_script(WAIT_FOR_MATHJAX)
    deadline = time.monotonic() + 20
    while not driver.execute_script(IMAGES_SETTLED) and time.monotonic() < deadline:
        time.sleep(0.1)
    info = driver.execute_script(INSPECT)

    problems = []
    if mathjax.startswith("mathjax"):
        problems.append(mathjax)
    if info["mathElements"] and not info["containers"]:
        problems.append(
            f"{info['mathElements']} math elements but MathJax typeset nothing ({mathjax})"
        )
    problems += [f"math not typeset: {t!r}" for t in info["untypeset"]]
    problems += [f"MathJax error: {t!r}" for t in info["mathErrors"]]
    problems += [f"undefined TeX macro: {t!r}" for t in info["undefinedMacros"]]
    problems += [f"raw TeX in the text: {t!r}" for t in find_raw_tex(info["text"])]
    problems += [
        f"unresolved marker '??' in the text: {m!r}" for m in UNRESOLVED.findall(info["text"])
    ]
    problems += [f"image failed to load: {src!r}" for src in info["brokenImages"]]
    problems += [f"unresolved cross-reference: {t!r}" for t in info["unresolvedRefs"]]

    for entry in driver.get_log("browser"):
        message = entry.get("message", "")
        # Browsers ask every server for /favicon.ico on their own; the book does not link it.
        if message.startswith(base_url + "favicon.ico ") and "404" in message:
            continue
        if entry.get("level") == "SEVERE":
            problems.append(f"console error: {message}")
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if not _is_local(url, base_url):
                problems.append(f"request outside the local server: {url}")

    if screenshot is not None:
        save_full_page_screenshot(driver, screenshot, info["height"])
    return problems


def screenshot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "__") + ".png"


# ---------------------------------------------------------------------------------------------
# The book (each page's own test, test_page, is in test_layout.py: it shares the page's load at
# 1280 px with the layout checks there)


@pytest.mark.browser
def test_mathjax_is_served_locally(html_dir):
    """Pages with math load the vendored MathJax.

    No page loads a script or stylesheet from elsewhere.
    """
    assert (html_dir / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert (html_dir / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    with_math = 0
    for page in PAGES:
        html = (html_dir / page).read_text(encoding="utf8")
        urls = _parse(html_dir / page).urls
        scripts = [url for tag, url in urls if tag in ("script", "link")]
        if 'class="math' in html:
            with_math += 1
            assert any("_static/mathjax/tex-mml-chtml.js" in url for url in scripts), (
                f"{page} lacks local MathJax"
            )
        remote = [url for url in scripts if EXTERNAL.match(url) and not url.startswith("data:")]
        assert not remote, f"{page} loads remote resources: {remote}"
    assert with_math, "no page of the book has math: is MathJax exercised at all?"


# ---------------------------------------------------------------------------------------------
# The detectors can fail


def test_toc_pages_are_all_tested():
    docs = toc_files()
    assert docs and docs[0] == "book/intro"
    assert all(f"{doc}.html" in PAGES for doc in docs)


def test_detector_raw_tex():
    assert find_raw_tex("the sum $$\\sum_n x_n$$ here")
    assert find_raw_tex("with \\begin{align} a &= b \\end{align}")
    assert find_raw_tex("a ratio \\frac{a}{b} left over")
    assert find_raw_tex("inline $x_n$ math")
    assert find_raw_tex("delimited \\(x\\) math")
    assert not find_raw_tex("Plain prose with 3 tokens, a cost of 5 $ and a ratio a/b.")
    assert not find_raw_tex("")


def test_detector_broken_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "target.html").write_text('<h1 id="there">T</h1>', encoding="utf8")
    (tmp_path / "sub" / "page.html").write_text(
        '<p id="here"><a href="#here">ok</a> <a href="target.html#there">ok</a> '
        '<a href="https://x.org/y">ext</a>'
        ' <a href="#nowhere">bad anchor</a> <a href="target.html#gone">bad remote anchor</a>'
        ' <a href="missing.html">missing page</a> <img src="../img/missing.png"> '
        '<a href="../../out.html">out</a></p>',
        encoding="utf8",
    )
    problems = find_broken_links(tmp_path, "sub/page.html")
    assert len(problems) == 5, problems
    for needle in ("nowhere", "gone", "missing.html", "missing.png", "outside"):
        assert any(needle in p for p in problems), (needle, problems)


BAD_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bad</title></head><body>
<p>Display math that nobody typeset: $$\sum_n x_n$$ and <span class="math">\(x\)</span>.</p>
<p>See <span class="xref std std-ref">some-label</span> and Fig. ??.</p>
<p><img src="missing.png" alt="missing"> <a href="#nowhere">anchor</a></p>
<pre>code may contain $$ and \frac{a}{b} freely</pre>
<script>console.error("deliberate error");</script>
</body></html>
"""

GOOD_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>good</title><link rel="icon" href="data:,"></head><body>
<p id="top">Plain text, <a href="#top">a link</a>, and code: <code>$$x$$</code>.</p>
</body></html>
"""


@pytest.mark.browser
def test_detector_in_browser(tmp_path, driver, serve_dir):
    (tmp_path / "bad.html").write_text(BAD_PAGE, encoding="utf8")
    (tmp_path / "good.html").write_text(GOOD_PAGE, encoding="utf8")
    with serve_dir(tmp_path) as server:
        bad = check_in_browser(driver, server.url, "bad.html") + find_broken_links(
            tmp_path, "bad.html"
        )
        good = check_in_browser(driver, server.url, "good.html") + find_broken_links(
            tmp_path, "good.html"
        )
    report = "\n".join(bad)
    for needle in (
        "math not typeset",
        "raw TeX in the text",
        "unresolved cross-reference",
        "'??'",
        "image failed to load",
        "console error",
        "no id 'nowhere'",
    ):
        assert needle in report, f"missed {needle!r} in:\n{report}"
    assert "frac" not in report, "text inside <pre> must not count as raw TeX"
    assert good == [], good
