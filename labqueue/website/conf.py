"""Sphinx settings for the course site (labqueue.website.build writes the pages beside them).

Offline by design: notebooks are not executed (their committed outputs are the page), no
widget manager or MathJax is loaded from a CDN (a panel shows the readable HTML the course
saved with it), and the theme (furo) ships its own assets. Sphinx's search index is a local
file, so the search box works without a server on the internet."""

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
# Quotes and ellipses made typographic, never dashes: "--grace" in a help text is an option.
smartquotes_action = "qe"
myst_heading_anchors = 3  # glossary.md#lease and the like
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header", "misc.highlighting_failure"]

# The package's reference (labqueue.website.reference): signatures and docstrings read from the
# code at every build. The docstrings are plain text, which autodoc would read as
# reStructuredText: labqueue.website.docstrings writes them as such first.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
add_module_names = False


def plain_text_docstring(app, what, name, obj, options, lines) -> None:
    """The docstring's plain text as reStructuredText that says the same."""
    from labqueue.website.docstrings import as_rst

    lines[:] = as_rst(lines)


def setup(app) -> None:
    app.connect("autodoc-process-docstring", plain_text_docstring)
