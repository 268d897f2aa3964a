"""Sphinx settings for the course site (labqueue.website.build writes the pages beside them).

Offline by design: notebooks are not executed (their committed outputs are the page), no
widget manager or MathJax is loaded from a CDN (a panel shows the readable HTML the course
saved with it), and the theme (furo) ships its own assets. Sphinx's search index is a local
file, so the search box works without a server on the internet."""

import re

project = "labqueue: a durable job queue on one SQLite file"
author = "the labqueue authors"
extensions = ["myst_nb", "sphinx.ext.autodoc"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "furo"
html_title = "labqueue"
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_copy_source = False
html_show_sourcelink = False

nb_execution_mode = "off"  # the committed outputs are the course's results
nb_ipywidgets_js = {}  # no widget manager from a CDN: panels show their saved HTML instead
# Prefer the saved HTML (and images) to a widget view, which needs a live kernel.
# LaTeX (pandas writes it beside its HTML tables) is never rendered: it would pull in MathJax.
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "text/latex", None),
]
nb_merge_streams = True
myst_heading_anchors = 3  # glossary.md#lease and the like
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header", "misc.highlighting_failure"]

# The package's reference (labqueue.website.reference): signatures and docstrings read from the
# code at every build. Docstrings are plain text with `name` for code, as the project writes
# them; autodoc reads them as reStructuredText, where a single backtick means something else.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
add_module_names = False
CODE = re.compile(r"(?<![`\w:])`([^`\n]+)`(?![`\w])")


def code_in_backticks(app, what, name, obj, options, lines) -> None:
    """A docstring's `name` as code (``name``), as the project means it."""
    lines[:] = [CODE.sub(r"``\1``", line) for line in lines]


def setup(app) -> None:
    app.connect("autodoc-process-docstring", code_in_backticks)
