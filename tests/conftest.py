"""Shared pytest configuration.

Only the command-line option of the browser test lives here: pytest parses the command line
before it collects tests/browser/, so the option must be registered by a conftest it loads first.
"""


def pytest_addoption(parser):
    parser.addoption(
        "--run-browser",
        action="store_true",
        default=False,
        help="run the headless-Chromium test of the built HTML book (tests/browser; needs `make book`)",
    )
