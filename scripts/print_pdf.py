"""Print the single-page HTML book to one PDF with headless Chromium, then check the PDF.

``make pdf`` builds the book with Sphinx's single-page builder and runs this script on it. The
page is opened from ``file://`` (no server, no network), its mathematics typeset by the vendored
MathJax and its widgets drawn by the book's own scripts; then, before printing, the solution of
every exercise moves from its collapsed dropdown to a "Solutions" section at the end of its
chapter, and the print styles of ``_css/print.css`` are added (each chapter starts a page).

Chromium numbers the body's pages in their footers and writes a named destination (page and
place) for every target of a printed link; each heading gets a link of one pixel to itself, so
the printed body says on which page every heading starts. From those pages the script writes the
front matter, a title page (the title and author of ``_config.yml``, the version of
``pyproject.toml``, no date) and a contents page listing every part, chapter and section with its
page, and prints it in the same browser. The front matter is then put before the body as an
incremental update of Chromium's file, which adds an outline (bookmarks) of parts, chapters,
sections and subsections, links each contents entry to its heading, and labels the front pages
i, ii, ... and the body's pages 1, 2, ... as their footers read. The body is printed once: the
contents' page numbers do not depend on the front matter's length.

The PDF is written to a temporary file beside the output and moved into place only once the
checks pass (``problems``): at least ``--min-pages`` pages, every chapter's title present, no
unresolved reference (``??``), at least as many images as the page has figures, the title page
first, a contents entry for every part, chapter and section whose page number is the page on
which that page's text shows the heading, an outline entry for each of them pointing to such a
page, and every body page's footer reading its page label.

Usage: python scripts/print_pdf.py SINGLEHTML_DIR OUTPUT_PDF
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import html
import io
import os
import re
import shutil
import sys
import tempfile
import time
import tomllib
import unicodedata
from pathlib import Path

import yaml
from pypdf import PdfReader
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    FloatObject,
    IndirectObject,
    NameObject,
    NullObject,
    NumberObject,
    StreamObject,
    TextStringObject,
)
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
PRINT_CSS = REPO / "_css" / "print.css"

# _config.yml has a title and an author but no subtitle (Jupyter Book's configuration has no
# such field): the title page's subtitle is this line.
SUBTITLE = (
    "The transformer built from its maths, one equation at a time, "
    "with every equation backed by tested JAX and Equinox code"
)

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1280,1000",
    "--lang=en-US",
]

PAPER = {
    "paperWidth": 8.27,  # A4, in inches
    "paperHeight": 11.69,
    "marginTop": 0.6,
    "marginBottom": 0.6,
    "marginLeft": 0.6,
    "marginRight": 0.6,
}
FOOTER = (
    '<div style="font-size:8px;width:100%;text-align:center;color:#555">'
    '<span class="pageNumber"></span></div>'
)
# The contents' entries are printed as links to this address followed by the index of their
# heading; pypdf turns each into a link to the heading's place in the body.
CONTENTS_LINK = "https://contents.invalid/heading/"

# Waits for MathJax, loads every lazy image, adds the print styles (arguments[0]), moves each
# exercise's solution to the end of its chapter under "Solutions", headed by the exercise's
# number, and lists the headings that print: for each, its document (the marker's name, null
# for the root document), its depth below the document's title (0 for the title, 1 for a
# section, 2 for a subsection), its text with the TeX of any mathematics in it, the pieces of
# that text between the mathematics (what the PDF's text holds) and its HTML for the contents.
PREPARE = r"""
const css = arguments[0];
const done = arguments[arguments.length - 1];
(async () => {
  if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  const images = [...document.images];
  images.forEach((img) => { img.loading = "eager"; });
  await Promise.all(images.map((img) => img.complete ? null :
    new Promise((ok) => { img.onload = img.onerror = ok; })));
  const style = document.createElement("style");
  style.textContent = css;
  document.head.append(style);

  const documents = new Map();
  const root = document.querySelector("article.bd-article section");
  if (root) documents.set(root, null);
  let moved = 0, chapters = [];
  for (const marker of document.querySelectorAll('span[id^="document-"]')) {
    const chapter = marker.nextElementSibling;
    if (!chapter || chapter.tagName !== "SECTION") continue;
    documents.set(chapter, marker.id.slice("document-".length));
    const title = chapter.querySelector("h1, h2, h3");
    chapters.push(title ? title.textContent.replace(/#$/, "").trim() : marker.id);
    const solutions = [];
    let number = 0;
    for (const el of chapter.querySelectorAll("ol, details.sd-dropdown")) {
      if (el.tagName === "OL") {
        if (el.closest("details.sd-dropdown")) continue;  // a list inside a solution
        number = (parseInt(el.getAttribute("start") || "1", 10)) + el.children.length - 1;
      } else {
        const summary = el.querySelector("summary");
        if (!summary || !/solution/i.test(summary.textContent)) continue;
        solutions.push([number, el]);
      }
    }
    if (!solutions.length) continue;
    // one level below the chapter's title, like the chapter's other sections
    const level = Math.min(6, (title ? parseInt(title.tagName[1], 10) : 1) + 1);
    const section = document.createElement("section");
    section.className = "print-solutions";
    section.innerHTML = `<h${level}>Solutions</h${level}>`;
    for (const [n, details] of solutions) {
      const heading = document.createElement("p");
      heading.className = "rubric";
      heading.textContent = n ? `Exercise ${n}` : "Exercise";
      const body = details.querySelector(".sd-summary-content") || details;
      section.append(heading, ...body.childNodes);
      details.remove();
      moved += 1;
    }
    chapter.append(section);
  }

  const tex = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.document) {
    for (const item of MathJax.startup.document.math) {
      if (item.typesetRoot) tex.set(item.typesetRoot, item.math);
    }
  }
  const HEADING = "h1, h2, h3, h4, h5, h6";
  const headings = [];
  for (const h of document.querySelectorAll("section > :is(h1, h2, h3, h4, h5, h6)")) {
    const section = h.parentElement;
    if (section.querySelector(`:scope > :is(${HEADING})`) !== h) continue;
    if (!h.getClientRects().length) continue;  // not printed (the media is print's)
    let owner = section, depth = 0;
    while (owner && !documents.has(owner)) {
      owner = owner.parentElement && owner.parentElement.closest("section");
      depth += 1;
    }
    if (!owner || depth > 2) continue;
    let title = "", piece = "";
    const pieces = [];
    const walk = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === Node.TEXT_NODE) {
          title += child.textContent; piece += child.textContent;
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          if (child.classList.contains("headerlink")) continue;
          if (child.tagName === "MJX-CONTAINER") {
            title += tex.has(child) ? tex.get(child).trim() : child.textContent;
            pieces.push(piece); piece = "";
          } else {
            walk(child);
          }
        }
      }
    };
    walk(h);
    pieces.push(piece);
    const copy = h.cloneNode(true);
    copy.querySelectorAll(".headerlink").forEach((a) => a.remove());
    // Chromium writes a named destination (page and place) for each target of a printed link:
    // a link of one pixel from the heading to itself records where the heading starts.
    h.id = h.id || `print-heading-${headings.length}`;
    const anchor = document.createElement("a");
    anchor.className = "print-anchor";
    anchor.href = "#" + h.id;
    anchor.setAttribute("aria-hidden", "true");
    h.append(anchor);
    headings.push({
      anchor: h.id,
      document: documents.get(owner), depth,
      title: title.replace(/\s+/g, " ").trim(),
      pieces: pieces.map((p) => p.replace(/\s+/g, " ").trim()).filter((p) => p),
      html: copy.innerHTML.trim(),
    });
  }
  return {moved, chapters, headings, figures: document.querySelectorAll("figure img").length};
})().then(done, (error) => done({error: String(error)}));
"""


@contextlib.contextmanager
def browser():
    """A headless Chromium driven by chromedriver, closed (and its profile removed) on exit."""
    from selenium import webdriver

    chromium = shutil.which("chromium") or shutil.which("google-chrome")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        sys.exit(
            "make pdf needs chromium and chromedriver: apt-get install chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix="book-pdf-")
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=webdriver.ChromeService(executable_path=chromedriver), options=options
    )
    # Printing some 300 pages takes Chromium minutes on a busy machine; chromedriver's default
    # of 120 s for one command is not enough.
    driver.command_executor.client_config.timeout = 1800
    try:
        driver.set_script_timeout(600)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def prepare(driver, page: Path) -> dict:
    """Open ``page`` and make it ready to print; what the preparation did and found."""
    driver.get(page.resolve().as_uri())
    # the headings' visibility is judged as printed (the theme hides some headings in print)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    report = driver.execute_async_script(PREPARE, PRINT_CSS.read_text(encoding="utf-8"))
    if "error" in report:
        sys.exit(f"preparing the page for print failed: {report['error']}")
    return report


def print_to_pdf(driver, numbered: bool) -> bytes:
    """The open page as a PDF: ``numbered``, the book's body, with page numbers in the footers
    (and tagged, as Chromium prints by default); else the front matter, neither."""
    options = {**PAPER, "printBackground": True}
    if numbered:
        options.update(
            displayHeaderFooter=True, headerTemplate="<div></div>", footerTemplate=FOOTER
        )
    else:
        options.update(generateTaggedPDF=False)
    pdf = driver.execute_cdp_cmd("Page.printToPDF", options)
    return base64.b64decode(pdf["data"])


def print_page(page: Path) -> tuple[bytes, dict]:
    """The page's body printed by headless Chromium, and what the preparation reported."""
    with browser() as driver:
        report = prepare(driver, page)
        return print_to_pdf(driver, numbered=True), report


def flat(text: str) -> str:
    """``text`` as compared with a PDF's: NFKC (the fonts set "fi" as one ligature), no spaces
    (the extracted text may lose the spaces at line ends)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def outline_entries(reader: PdfReader) -> list[tuple[int, str, object]]:
    """The PDF's outline in reading order: (depth, title, destination) for every entry."""
    entries = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                entries.append((depth, item.title, item))

    walk(reader.outline, 0)
    return entries


def heading_places(body: PdfReader, headings: list[dict]) -> list[tuple[int, float, float]]:
    """Where each heading starts in the body: (page index, left, top), read from the named
    destination that Chromium wrote for the heading's anchor."""
    named = body.named_destinations
    places = []
    for heading in headings:
        dest = named.get("/" + heading["anchor"], named.get(heading["anchor"]))
        if dest is None:
            sys.exit(
                f"the heading {heading['title']!r} has no destination in the printed body: "
                "is it hidden in print?"
            )
        places.append((body.get_destination_page_number(dest), dest.left, dest.top))
    return places


def _holds(text: str, pieces: list[str]) -> bool:
    """Whether ``text`` holds every piece, in order."""
    at = 0
    for piece in pieces:
        at = text.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def read_book(config: Path, toc: Path, pyproject: Path) -> dict:
    """The title page's lines and the book's parts, from the book's own configuration files."""
    settings = yaml.safe_load(config.read_text(encoding="utf-8"))
    contents = yaml.safe_load(toc.read_text(encoding="utf-8"))
    version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    for key in ("title", "author"):
        if not (settings or {}).get(key):
            sys.exit(f"{config} has no {key}: the PDF's title page prints it; add `{key}: ...`")
    if not (contents or {}).get("root"):
        sys.exit(f"{toc} names no root document: the PDF's contents follow it; add `root: ...`")
    parts = [
        (part["caption"], [chapter["file"] for chapter in part.get("chapters", [])])
        for part in contents.get("parts", [])
    ]
    return {
        "title": settings["title"],
        "author": settings["author"],
        "subtitle": SUBTITLE,
        "version": version,
        "root": contents["root"],
        "parts": parts,
    }


def contents_entries(book: dict, headings: list[dict]) -> list[dict]:
    """The contents in reading order: each part (at its first chapter), then each document's
    title and sections; every entry names the heading it points to."""
    part_of = {doc: caption for caption, docs in book["parts"] for doc in docs}
    entries, part = [], None
    for index, heading in enumerate(headings):
        doc = heading["document"] or book["root"]
        if heading["depth"] == 0 and part_of.get(doc) and part_of[doc] != part:
            part = part_of[doc]
            entries.append(
                {
                    "kind": "part",
                    "title": part,
                    "pieces": [part],
                    "heading": index,
                    "shows": heading["pieces"],  # a part starts with its first chapter
                }
            )
        if heading["depth"] <= 1:
            entries.append(
                {"kind": "heading", **heading, "heading": index, "shows": heading["pieces"]}
            )
    return entries


def front_matter(book: dict, entries: list[dict], pages: list[int]) -> str:
    """The HTML of the title page and the contents; ``pages[i]`` is heading i's page number."""
    lines = []
    for entry in entries:
        number = pages[entry["heading"]]
        if entry["kind"] == "part":
            css, text = "toc-part", html.escape(entry["title"])
        else:
            css, text = f"toc-depth-{entry['depth']}", entry["html"]
        lines.append(
            f'<a class="toc-entry {css}" href="{CONTENTS_LINK}{entry["heading"]}">'
            f'<span class="toc-title">{text}</span><span class="toc-fill"></span>'
            f'<span class="toc-page">{number}</span></a>'
        )
    return (
        '<div class="title-page">'
        f'<p class="book-title">{html.escape(book["title"])}</p>'
        f'<p class="book-subtitle">{html.escape(book["subtitle"])}</p>'
        f'<p class="book-author">{html.escape(book["author"])}</p>'
        f'<p class="book-version">Version {html.escape(book["version"])}</p>'
        "</div>"
        '<div class="contents"><h1>Contents</h1>' + "\n".join(lines) + "</div>"
    )


def print_front_matter(driver, markup: str) -> bytes:
    """``markup`` printed in place of the open page's body, with the page's styles."""
    driver.execute_script(
        "document.body.className = 'print-front'; document.body.innerHTML = arguments[0];"
        "return document.fonts.ready;",
        markup,
    )
    return print_to_pdf(driver, numbered=False)


class _Update:
    """An incremental update of a PDF: new and replaced objects written after the file's own
    bytes, with a cross-reference section of their own. The book's body keeps its 95,000
    objects as Chromium wrote them; pypdf took a minute to parse and rewrite them all."""

    SKIPPED = ("/Length", "/StructParent", "/StructParents")  # the front matter is not tagged

    def __init__(self, data: bytes):
        self.data = data
        self.reader = PdfReader(io.BytesIO(data))
        used = [idnum for table in self.reader.xref.values() for idnum in table]
        self.next = max([int(self.reader.trailer["/Size"]), *(n + 1 for n in used)])
        self.objects: dict[int, object] = {}
        self.copied: dict[int, IndirectObject] = {}

    def reserve(self) -> IndirectObject:
        ref = IndirectObject(self.next, 0, None)  # written as a reference, never resolved
        self.next += 1
        return ref

    def resolve(self, obj):
        """``obj``, or the new object it refers to."""
        return self.objects[obj.idnum] if isinstance(obj, IndirectObject) else obj

    def put(self, ref: IndirectObject, obj) -> IndirectObject:
        self.objects[ref.idnum] = obj
        return ref

    def copy(self, obj):
        """``obj`` of another PDF, with every object it refers to, as new objects of this one."""
        if isinstance(obj, IndirectObject):
            if obj.idnum not in self.copied:
                self.copied[obj.idnum] = self.reserve()
                self.put(self.copied[obj.idnum], self.copy(obj.get_object()))
            return self.copied[obj.idnum]
        if isinstance(obj, StreamObject):
            stream = obj.__class__()
            stream._data = obj._data  # the encoded bytes as they are (pypdf has no public setter)
            stream.update({k: self.copy(v) for k, v in obj.items() if k not in self.SKIPPED})
            return stream
        if isinstance(obj, DictionaryObject):
            return DictionaryObject(
                {k: self.copy(v) for k, v in obj.items() if k not in self.SKIPPED}
            )
        if isinstance(obj, ArrayObject):
            return ArrayObject(self.copy(v) for v in obj)
        return obj

    def write(self) -> bytes:
        out = io.BytesIO()
        out.write(self.data if self.data.endswith(b"\n") else self.data + b"\n")
        offsets = {}
        for idnum in sorted(self.objects):
            offsets[idnum] = out.tell()
            out.write(f"{idnum} 0 obj\n".encode())
            self.objects[idnum].write_to_stream(out)
            out.write(b"\nendobj\n")
        xref = out.tell()
        out.write(b"xref\n")
        ids = sorted(offsets)
        runs = [[ids[0]]]
        for idnum in ids[1:]:
            if idnum == runs[-1][-1] + 1:
                runs[-1].append(idnum)
            else:
                runs.append([idnum])
        for run in runs:
            out.write(f"{run[0]} {len(run)}\n".encode())
            out.write(b"".join(f"{offsets[i]:010d} 00000 n\r\n".encode() for i in run))
        previous = re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", self.data)
        trailer = DictionaryObject(
            {
                NameObject("/Size"): NumberObject(self.next),
                NameObject("/Prev"): NumberObject(int(previous.group(1))),
            }
        )
        for key in ("/Root", "/Info", "/ID"):
            if key in self.reader.trailer:
                trailer[NameObject(key)] = self.reader.trailer.raw_get(key)
        out.write(b"trailer\n")
        trailer.write_to_stream(out)
        out.write(f"\nstartxref\n{xref}\n%%EOF\n".encode())
        return out.getvalue()


def bind(
    front: bytes,
    body: bytes,
    book: dict,
    headings: list[dict],
    places: list[tuple[int, float, float]],
) -> bytes:
    """The front matter before the body, with links, an outline and page labels."""
    update = _Update(body)
    reader = update.reader
    body_pages = [page.indirect_reference for page in reader.pages]
    catalog = reader.trailer["/Root"]
    old_tree = catalog.raw_get("/Pages")
    tree = update.reserve()

    def destination(index: int) -> ArrayObject:
        page, left, top = places[index]
        return ArrayObject(
            [
                body_pages[page],
                NameObject("/XYZ"),
                FloatObject(left),
                FloatObject(top),
                NullObject(),
            ]
        )

    front_pages = []
    for page in PdfReader(io.BytesIO(front)).pages:
        ref = update.copied[page.indirect_reference.idnum] = update.reserve()
        copy = update.copy(DictionaryObject({k: v for k, v in page.items() if k != "/Parent"}))
        copy[NameObject("/Parent")] = tree
        front_pages.append(update.put(ref, copy))
        for annotation in update.resolve(copy.raw_get("/Annots") if "/Annots" in copy else []):
            link = update.resolve(annotation)
            action = update.resolve(link.raw_get("/A")) if "/A" in link else {}
            uri = str(action.get("/URI", ""))
            if uri.startswith(CONTENTS_LINK):
                link[NameObject("/Dest")] = destination(int(uri[len(CONTENTS_LINK) :]))
                del link["/A"]

    old = DictionaryObject(old_tree.get_object())
    old[NameObject("/Parent")] = tree
    update.put(old_tree, old)
    update.put(
        tree,
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Pages"),
                NameObject("/Kids"): ArrayObject([*front_pages, old_tree]),
                NameObject("/Count"): NumberObject(len(front_pages) + len(body_pages)),
            }
        ),
    )

    # The outline: the contents, then the root document, each part and under it its chapters,
    # their sections and subsections; parts open, chapters closed.
    contents = {"title": "Contents", "children": [], "open": False}
    contents["dest"] = ArrayObject([front_pages[1], NameObject("/Fit")])
    top, parents, part = [contents], {}, None
    part_of = {doc: caption for caption, docs in book["parts"] for doc in docs}
    for index, heading in enumerate(headings):
        item = {"title": heading["title"], "dest": destination(index), "children": []}
        item["open"] = False
        depth = heading["depth"]
        if depth == 0:
            doc = heading["document"] or book["root"]
            if part_of.get(doc) != part:
                part = part_of.get(doc)
                if part:
                    top.append({"title": part, "dest": destination(index), "children": []})
                    top[-1]["open"] = True
            (top[-1]["children"] if part else top).append(item)
            parents = {0: item}
        elif depth - 1 in parents:
            parents[depth - 1]["children"].append(item)
            parents = {d: it for d, it in parents.items() if d < depth} | {depth: item}
    outlines = update.reserve()
    count = _write_outline(update, top, outlines)
    update.put(
        outlines,
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Outlines"),
                NameObject("/First"): top[0]["ref"],
                NameObject("/Last"): top[-1]["ref"],
                NameObject("/Count"): NumberObject(count),
            }
        ),
    )

    root = DictionaryObject(catalog)
    root[NameObject("/Pages")] = tree
    root[NameObject("/Outlines")] = outlines
    root[NameObject("/PageMode")] = NameObject("/UseOutlines")
    # front pages i, ii, ...; the body's 1, 2, ... as its footers read
    roman = DictionaryObject({NameObject("/S"): NameObject("/r")})
    arabic = DictionaryObject(
        {NameObject("/S"): NameObject("/D"), NameObject("/St"): NumberObject(1)}
    )
    labels = [NumberObject(0), roman, NumberObject(len(front_pages)), arabic]
    root[NameObject("/PageLabels")] = DictionaryObject({NameObject("/Nums"): ArrayObject(labels)})
    update.put(reader.trailer.raw_get("/Root"), root)
    # the document's title in a viewer: the book's, not the printed file's name
    info_ref = reader.trailer.raw_get("/Info") if "/Info" in reader.trailer else None
    if isinstance(info_ref, IndirectObject):
        info = DictionaryObject(info_ref.get_object())
        info[NameObject("/Title")] = TextStringObject(book["title"])
        info[NameObject("/Author")] = TextStringObject(book["author"])
        update.put(info_ref, info)
    return update.write()


def _write_outline(update: _Update, items: list[dict], parent: IndirectObject) -> int:
    """Write ``items`` (title, dest, children, open) as outline items under ``parent``; the
    number of them that show (an open item's children show too)."""
    for item in items:
        item["ref"] = update.reserve()
    shown = len(items)
    for i, item in enumerate(items):
        entry = DictionaryObject(
            {
                NameObject("/Title"): TextStringObject(item["title"]),
                NameObject("/Parent"): parent,
                NameObject("/Dest"): item["dest"],
            }
        )
        if i > 0:
            entry[NameObject("/Prev")] = items[i - 1]["ref"]
        if i + 1 < len(items):
            entry[NameObject("/Next")] = items[i + 1]["ref"]
        if item["children"]:
            below = _write_outline(update, item["children"], item["ref"])
            entry[NameObject("/First")] = item["children"][0]["ref"]
            entry[NameObject("/Last")] = item["children"][-1]["ref"]
            entry[NameObject("/Count")] = NumberObject(below if item["open"] else -below)
            shown += below if item["open"] else 0
        update.put(item["ref"], entry)
    return shown


def print_book(page: Path, book: dict, progress=None) -> tuple[bytes, dict]:
    """The whole PDF (front matter and body) of the single page, and the preparation's report
    with the book's title page, the contents' entries and the seconds each step took added."""
    seconds, start = {}, time.perf_counter()

    def done(step: str) -> None:
        nonlocal start
        seconds[step] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        if progress:
            progress.update()

    with browser() as driver:
        report = prepare(driver, page)
        done("prepare")
        body = print_to_pdf(driver, numbered=True)
        done("print the body")
        places = heading_places(PdfReader(io.BytesIO(body)), report["headings"])
        entries = contents_entries(book, report["headings"])
        pages = [page_index + 1 for page_index, _, _ in places]
        front = print_front_matter(driver, front_matter(book, entries, pages))
        done("print the front matter")
    data = bind(front, body, book, report["headings"], places)
    done("bind")
    return data, {**report, "book": book, "contents": entries, "seconds": seconds}


def problems(path: Path, report: dict, min_pages: int) -> list[str]:
    """What is wrong with the printed book; empty when it passes the checks."""
    reader = PdfReader(path)
    texts = [unicodedata.normalize("NFKC", page.extract_text() or "") for page in reader.pages]
    text = "\n".join(texts)
    found = []
    if len(reader.pages) < min_pages:
        found.append(f"{len(reader.pages)} pages, fewer than {min_pages}")
    for title in report["chapters"]:
        if flat(title) not in flat(text):
            found.append(f"the chapter {title!r} is not in the PDF's text")
    if "??" in text:
        found.append("an unresolved reference (??) in the text")
    images = sum(len(page.images) for page in reader.pages)
    if images < report["figures"]:
        found.append(f"{images} images in the PDF for {report['figures']} figures in the page")
    if "book" in report:
        found += front_matter_problems(reader, texts, report)
    return found


def front_matter_problems(reader: PdfReader, texts: list[str], report: dict) -> list[str]:
    """The checks of the title page, the contents, the outline and the page numbers."""
    book, found = report["book"], []
    if not texts or not all(flat(book[k]) in flat(texts[0]) for k in ("title", "author")):
        found.append(f"page 1 is not the title page (the title {book['title']!r} and author)")
    labels = reader.page_labels
    first = labels.index("1") if "1" in labels else 0  # the body's page 1
    contents = "\n".join(texts[1:first])

    def on_page(number: str, pieces: list[str]) -> bool:
        return number in labels and _holds(flat(texts[labels.index(number)]), map(flat, pieces))

    if first < 2 or not re.match(r"\s*Contents", texts[1]):
        found.append("no contents page after the title page")
    else:
        at, wrong = 0, []
        for entry in report["contents"]:
            pattern = r".{0,200}?".join(
                r"\s*".join(map(re.escape, flat(piece))) for piece in entry["pieces"]
            )
            match = re.compile(pattern + r"[\s.]*(\d+)(?!\d)", re.S).search(contents, at)
            if not match:
                wrong.append(f"{entry['title']!r} (not in the contents)")
                continue
            at = match.end()
            if not on_page(match.group(1), entry["shows"]):
                wrong.append(f"{entry['title']!r} (page {match.group(1)})")
        if wrong:
            found.append(
                f"{len(wrong)} of {len(report['contents'])} contents entries do not give the page "
                "that shows them: " + ", ".join(wrong[:5])
            )

    outline = [(flat(title), dest) for _, title, dest in outline_entries(reader)]
    if not outline:
        found.append("the PDF has no outline (bookmarks)")
    else:
        # in the outline's order: each part just before its first chapter
        parts = {e["heading"]: e for e in report["contents"] if e["kind"] == "part"}
        wanted = []  # (the entry's title, what its page shows)
        for index, heading in enumerate(report["headings"]):
            if index in parts:
                wanted.append((parts[index]["pieces"], heading["pieces"]))
            wanted.append((heading["pieces"], heading["pieces"]))
        at, wrong = 0, []
        for pieces, shows in wanted:
            hit = next(
                (i for i in range(at, len(outline)) if _holds(outline[i][0], map(flat, pieces))),
                None,
            )
            if hit is None:
                wrong.append(" ".join(pieces) + " (no entry)")
                continue
            at = hit + 1
            number = labels[reader.get_destination_page_number(outline[hit][1])]
            if not on_page(number, shows):
                wrong.append(" ".join(pieces) + f" (page {number})")
        if wrong:
            found.append(
                f"{len(wrong)} of {len(wanted)} headings have no outline entry pointing to "
                "their page: " + ", ".join(map(repr, wrong[:5]))
            )
    footers = [i for i in range(first, len(texts)) if _last_line(texts[i]) != labels[i]]
    if footers:
        found.append(
            f"{len(footers)} pages whose footer does not read their page number, the first "
            f"page {footers[0] + 1} (labelled {labels[footers[0]]})"
        )
    return found


def _last_line(text: str) -> str:
    """The last line of a page's text: its footer."""
    return text.rstrip().rsplit("\n", 1)[-1].strip()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path, help="the single-page build (_build/singlehtml)")
    parser.add_argument("output", type=Path, help="where to write the PDF")
    parser.add_argument("--min-pages", type=int, default=200)
    args = parser.parse_args(argv)
    built = args.build / "book" / "intro.html"
    if not built.is_file():
        sys.exit(f"no single-page book at {built}: build it with `make pdf`")
    book = read_book(REPO / "_config.yml", REPO / "_toc.yml", REPO / "pyproject.toml")
    # Sphinx writes the root document's page under book/ but makes its links relative to the
    # build's root (_static/, _images/), so it is printed from a copy there.
    page = args.build / "print.html"
    shutil.copyfile(built, page)
    start = time.perf_counter()
    with tqdm(total=5, desc="printing the PDF", unit="step") as progress:
        data, report = print_book(page, book, progress)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.output.with_name(args.output.name + ".tmp")
        tmp.write_bytes(data)
        start_checks = time.perf_counter()
        found = problems(tmp, report, args.min_pages)
        report["seconds"]["check"] = round(time.perf_counter() - start_checks, 1)
        progress.update()
    if found:
        sys.exit("the PDF failed its checks (left at " + str(tmp) + "):\n  " + "\n  ".join(found))
    os.replace(tmp, args.output)
    reader = PdfReader(args.output)
    print(
        f"{args.output}: {len(reader.pages)} pages ({reader.page_labels.index('1')} before "
        f"page 1), {len(report['chapters'])} chapters, {len(outline_entries(reader))} outline "
        f"entries, {len(report['contents'])} contents entries, {report['figures']} figures, "
        f"{report['moved']} solutions moved to their chapters' ends; "
        f"{time.perf_counter() - start:.0f} s in all: "
        + ", ".join(f"{step} {t} s" for step, t in report["seconds"].items())
    )


if __name__ == "__main__":
    main()
