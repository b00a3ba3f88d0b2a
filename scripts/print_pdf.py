"""Print the single-page HTML book to one PDF with headless Chromium, then check the PDF.

``make pdf`` builds the book with Sphinx's single-page builder and runs this script on it. The
page is opened from ``file://`` (no server, no network), its mathematics typeset by the vendored
MathJax and its widgets drawn by the book's own scripts; then, before printing, the solution of
every exercise moves from its collapsed dropdown to a "Solutions" section at the end of its
chapter. The PDF is written to a temporary file beside the output and moved into place only once
the checks pass: at least ``--min-pages`` pages, every chapter's title present, no unresolved
reference (``??``), and at least as many images as the page has figures.

Usage: python scripts/print_pdf.py SINGLEHTML_DIR OUTPUT_PDF
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import sys
import tempfile
import unicodedata
from pathlib import Path

from pypdf import PdfReader

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

# Waits for MathJax, loads every lazy image, and moves each exercise's solution to the end of its
# chapter under "Solutions", headed by the exercise's number. Returns what it did, for the report.
PREPARE = r"""
const done = arguments[arguments.length - 1];
(async () => {
  if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  const images = [...document.images];
  images.forEach((img) => { img.loading = "eager"; });
  await Promise.all(images.map((img) => img.complete ? null :
    new Promise((ok) => { img.onload = img.onerror = ok; })));
  let moved = 0, chapters = [];
  for (const marker of document.querySelectorAll('span[id^="document-book/"]')) {
    const chapter = marker.nextElementSibling;
    if (!chapter || chapter.tagName !== "SECTION") continue;
    const title = chapter.querySelector("h1, h2");
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
    const section = document.createElement("section");
    section.className = "print-solutions";
    section.innerHTML = "<h2>Solutions</h2>";
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
  // Cells whose code the HTML hides stay out of the print; so do controls that need a click.
  const style = document.createElement("style");
  style.textContent = `@media print {
    details.hide, .book-live, button.live-button { display: none !important; }
    .print-solutions .rubric { font-weight: bold; margin-top: 1em; }
    section, figure, img, .cell_output { break-inside: auto; }
    figure, img { break-inside: avoid; }
  }`;
  document.head.append(style);
  return {moved, chapters, figures: document.querySelectorAll("figure img").length};
})().then(done, (error) => done({error: String(error)}));
"""


def print_page(page: Path) -> tuple[bytes, dict]:
    """The page printed by headless Chromium, and what the preparation reported."""
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
    try:
        driver.set_script_timeout(600)
        driver.get(page.resolve().as_uri())
        report = driver.execute_async_script(PREPARE)
        if "error" in report:
            sys.exit(f"preparing the page for print failed: {report['error']}")
        footer = (
            '<div style="font-size:8px;width:100%;text-align:center;color:#555">'
            '<span class="pageNumber"></span></div>'
        )
        pdf = driver.execute_cdp_cmd(
            "Page.printToPDF",
            {
                "printBackground": True,
                "paperWidth": 8.27,  # A4, in inches
                "paperHeight": 11.69,
                "marginTop": 0.6,
                "marginBottom": 0.6,
                "marginLeft": 0.6,
                "marginRight": 0.6,
                "displayHeaderFooter": True,
                "headerTemplate": "<div></div>",
                "footerTemplate": footer,
            },
        )
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return base64.b64decode(pdf["data"]), report


def problems(path: Path, report: dict, min_pages: int) -> list[str]:
    """What is wrong with the printed book; empty when it passes the checks."""
    reader = PdfReader(path)
    # NFKC: the PDF's fonts set "fi" and "ff" as single ligature characters.
    text = unicodedata.normalize("NFKC", "\n".join(p.extract_text() or "" for p in reader.pages))
    flat = re.sub(r"\s+", "", text)  # the extracted text may lose the spaces at line ends
    found = []
    if len(reader.pages) < min_pages:
        found.append(f"{len(reader.pages)} pages, fewer than {min_pages}")
    for title in report["chapters"]:
        if re.sub(r"\s+", "", unicodedata.normalize("NFKC", title)) not in flat:
            found.append(f"the chapter {title!r} is not in the PDF's text")
    if "??" in text:
        found.append("an unresolved reference (??) in the text")
    images = sum(len(page.images) for page in reader.pages)
    if images < report["figures"]:
        found.append(f"{images} images in the PDF for {report['figures']} figures in the page")
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path, help="the single-page build (_build/singlehtml)")
    parser.add_argument("output", type=Path, help="where to write the PDF")
    parser.add_argument("--min-pages", type=int, default=200)
    args = parser.parse_args(argv)
    built = args.build / "book" / "intro.html"
    if not built.is_file():
        sys.exit(f"no single-page book at {built}: build it with `make pdf`")
    # Sphinx writes the root document's page under book/ but makes its links relative to the
    # build's root (_static/, _images/), so it is printed from a copy there.
    page = args.build / "print.html"
    shutil.copyfile(built, page)
    data, report = print_page(page)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_bytes(data)
    found = problems(tmp, report, args.min_pages)
    if found:
        sys.exit("the PDF failed its checks (left at " + str(tmp) + "):\n  " + "\n  ".join(found))
    os.replace(tmp, args.output)
    pages = len(PdfReader(args.output).pages)
    print(
        f"{args.output}: {pages} pages, {len(report['chapters'])} chapters, "
        f"{report['figures']} figures, {report['moved']} solutions moved to their chapters' ends"
    )


if __name__ == "__main__":
    main()
