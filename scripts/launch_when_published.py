"""Sphinx extension: Binder and Colab buttons only once the book names its public repository.

``_config.yml`` sets ``launch_buttons.binderhub_url`` and ``colab_url``. sphinx-book-theme builds
those buttons from ``repository.url``, and fails outright when the URLs are set but the repository
is not. This extension clears the launch URLs while ``repository.url`` is empty (the default), so
setting ``repository.url: https://github.com/OWNER/REPO`` is the one step that turns the buttons on.
"""

from __future__ import annotations

LAUNCH_URLS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url", "jupyterlite_url")


def drop_launch_links(app, config) -> None:
    options = config.html_theme_options
    if str(options.get("repository_url") or "").strip():
        return
    buttons = dict(options.get("launch_buttons") or {})
    for key in LAUNCH_URLS:
        if key in buttons:
            buttons[key] = ""
    options["launch_buttons"] = buttons


def setup(app):
    app.connect("config-inited", drop_launch_links, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
