"""The course site (python tasks.py site) read in headless Chromium with the network cut off:
every page loads with no console error and no failed or outside request, every figure is
drawn, each notebook page links to Binder and to its neighbours, and the search finds
"fencing"."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator

import pytest
from offline import offline_tab

from labqueue.website.build import build, pages

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[str]:
    """The site built into a scratch folder and served on 127.0.0.1."""
    out = build(tmp_path_factory.mktemp("site") / "site", remote="https://github.com/example/labqueue.git")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def page(browser, site):
    """A page whose every request off this machine is refused, with its troubles recorded."""
    context, tab = offline_tab(browser, site)
    yield tab
    context.close()


NAMES = ["index", "glossary", "feedback"] + [p.name for p in pages()]


@pytest.mark.parametrize("name", NAMES)
def test_every_page_loads_offline_with_its_figures_drawn(page, site, name):
    page.goto(f"{site}/{name}.html", wait_until="load")
    assert not page.troubles, page.troubles
    assert not page.outside, f"{name} asked the network for {page.outside}"
    sizes = page.eval_on_selector_all("article img", "imgs => imgs.map(i => [i.complete, i.naturalWidth])")
    assert all(done and width > 0 for done, width in sizes), f"{name}: undrawn figures {sizes}"
    # Alt text says what a figure shows: never empty, never the file's hashed name.
    alts = page.eval_on_selector_all("article img", "imgs => imgs.map(i => i.getAttribute('alt') || '')")
    assert all(alt.startswith(("Chart", "Picture")) for alt in alts), (
        f"{name}: images without alt text: {alts}"
    )
    assert name == "feedback" or "where to ask" in page.inner_text("article"), f"{name}: no feedback link"
    if name not in ("index", "glossary", "feedback"):
        run = page.locator(".run-live a").first.get_attribute("href")
        assert run.startswith("https://mybinder.org/v2/gh/example/labqueue/") and name in run
        assert page.locator("a.prev-page, a.next-page").count() >= 1  # previous / next links
        assert "What you learned" in page.inner_text("article")


def test_the_notebook_pages_have_their_figures(page, site):
    drawn = 0
    for name in NAMES[3:]:
        page.goto(f"{site}/{name}.html", wait_until="load")
        drawn += page.locator("article img").count()
    assert drawn >= 30  # the course's plots and diagrams, as committed


def test_the_search_finds_fencing(page, site):
    page.goto(f"{site}/search.html?q=fencing", wait_until="load")
    results = page.locator("ul.search li a")
    results.first.wait_for(timeout=20_000)
    titles = results.all_inner_texts()
    assert any("Zombie" in t for t in titles) and any("Glossary" in t for t in titles), titles
    assert not page.troubles and not page.outside
