"""The site (python tasks.py site) read in headless Chromium with the network cut off: every
page, the course's and the package's guide and reference, loads with no console error and no
failed or outside request, every figure is drawn, each notebook page links to Binder and to its
neighbours, the search finds "fencing" in the course and a method, an option and a variable in
the reference, and the package's pages read on a 400 px wide screen without scrolling sideways."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator

import pytest
from offline import offline_tab

from labqueue.website.build import GUIDE_PAGES, build, pages, site_places

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


NOTEBOOKS = [p.name for p in pages()]
# The guide's and the reference's pages (package/...), and the course's own guide (course).
GUIDE = sorted(
    place.removesuffix(".md")
    for where, place in site_places(pages()).items()
    if where.startswith("docs/package/") or where in GUIDE_PAGES
)
NAMES = ["index", "glossary", "feedback", *NOTEBOOKS, *GUIDE]


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
    if name in NOTEBOOKS:
        run = page.locator(".run-live a").first.get_attribute("href")
        assert run.startswith("https://mybinder.org/v2/gh/example/labqueue/") and name in run
        assert page.locator("a.prev-page, a.next-page").count() >= 1  # previous / next links
        assert "What you learned" in page.inner_text("article")


def test_the_notebook_pages_have_their_figures(page, site):
    drawn = 0
    for name in NOTEBOOKS:
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


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("enqueue", "JobQueue.enqueue"),  # a method, by its name
        ("commit-interval", "The labqueue command"),  # an option
        ("LABQUEUE_JOB_TIMEOUT", "Worker settings"),  # a variable
        ("labqueue_dead_jobs", "Metrics"),  # a metric
    ],
)
def test_the_search_finds_the_reference(page, site, query, found):
    page.goto(f"{site}/search.html?q={query}", wait_until="load")
    results = page.locator("ul.search li")
    results.first.wait_for(timeout=20_000)
    texts = results.all_inner_texts()
    assert any(found in text for text in texts), (query, texts)
    assert not page.troubles and not page.outside


@pytest.fixture
def phone(browser, site):
    """A tab 400 px wide, as a phone held upright shows the site."""
    context, tab = offline_tab(browser, site, viewport={"width": 400, "height": 800})
    yield tab
    context.close()


# The elements of the text that reach past the screen's right edge, other than those inside a box
# that scrolls sideways on its own (a wide table or code block): the theme hides the page's own
# horizontal overflow, so such an element would be cut off, not scrolled to.
CUT_OFF = """() => {
  const width = window.innerWidth, cut = [], article = document.querySelector('article');
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX)
      && el.getBoundingClientRect().right <= width + 1;
  for (const el of article.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    let up = el.parentElement;  // a box of its own inside the text, not the text's column
    while (up !== article && !scrolls(up)) up = up.parentElement;
    if (up === article) cut.push(`${el.tagName} ${Math.round(box.right)} px: ${el.textContent.slice(0, 60)}`);
  }
  return cut;
}"""


def test_the_package_pages_read_at_400_px(phone, site):
    for name in GUIDE:
        phone.goto(f"{site}/{name}.html", wait_until="load")
        cut = phone.evaluate(CUT_OFF)
        assert cut == [], f"{name} at 400 px: {cut[:5]}"
        size = phone.evaluate("parseFloat(getComputedStyle(document.querySelector('article p')).fontSize)")
        assert size >= 14, f"{name}: body text at {size} px"
        assert not phone.locator(".sidebar-drawer").is_visible() or phone.evaluate(
            "document.querySelector('.sidebar-drawer').getBoundingClientRect().right <= 0"
        ), f"{name}: the navigation covers the text"
        assert not phone.troubles and not phone.outside, name
