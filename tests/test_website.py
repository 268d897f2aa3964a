"""The course site's builder (labqueue.website): pages, links and the index, without Sphinx;
the built site itself is read in Chromium by tests/browser/test_site_in_browser.py."""

from __future__ import annotations

import json
import posixpath
import re

from labqueue.website import build

PICTURE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")  # a markdown image: ![alt](where)


def test_every_notebook_is_a_page_in_its_part_with_its_time():
    found = build.pages()
    assert len(found) == 19 and [p.name for p in found] == sorted(p.name for p in found)
    assert {p.part for p in found if p.name < "13"} == {1} and {p.part for p in found if p.name >= "13"} == {
        2
    }
    assert all(p.minutes and p.title[:2] == p.name[:2] for p in found)


def test_run_links_name_the_github_repository_or_the_placeholder():
    assert build.repository("https://github.com/ada/labqueue.git\n") == "ada/labqueue"
    assert build.repository("git@github.com:ada/labqueue.git") == "ada/labqueue"
    assert build.repository("/some/local/clone") == build.PLACEHOLDER_REPOSITORY
    link = build.run_link("ada/labqueue", "04_zombie_workers.ipynb")
    assert (
        link
        == "https://mybinder.org/v2/gh/ada/labqueue/HEAD?urlpath=lab%2Ftree%2Fnotebooks%2F04_zombie_workers.ipynb"
    )


def test_a_page_gains_its_run_link_and_points_at_the_sites_glossary():
    page = build.pages()[4]
    nb = build.page_source(page, "ada/labqueue")
    note = "".join(nb["cells"][1]["source"])
    assert "Run this notebook" in note and build.run_link("ada/labqueue", page.path.name) in note
    text = json.dumps(nb)
    assert "../docs/glossary.md" not in text and "(glossary.md#" in text


def test_the_index_lists_both_parts_in_order():
    text = build.index_text(build.pages())
    part1, part2 = text.index(":caption: Part 1"), text.index(":caption: Part 2")
    assert part1 < part2 < text.index("glossary\nfeedback\n```")
    assert text.index("12_chaos", part1) < part2 < text.index("14_retention", part2)


def test_a_link_to_a_repository_file_points_at_it_on_github():
    page = next(p for p in build.pages() if p.name.startswith("13_"))
    text = json.dumps(build.page_source(page, "ada/labqueue"))
    assert "](../README.md" not in text
    assert "](https://github.com/ada/labqueue/blob/HEAD/README.md#the-package)" in text


def test_every_figure_has_alt_text_from_its_title_or_its_section():
    for page in build.pages():
        for cell in build.page_source(page, "ada/labqueue")["cells"]:
            if any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
                alt = cell["metadata"]["mystnb"]["image"]["alt"]
                assert alt.startswith("Chart") and len(alt) > len("Chart: "), (page.name, alt)


def test_every_picture_in_the_text_exists_says_what_it_shows_and_ships_with_the_site():
    shown = 0
    for page in build.pages():
        nb = json.loads(page.path.read_text(encoding="utf-8"))
        site = json.dumps(build.page_source(page, "ada/labqueue"))
        for cell in (c for c in nb["cells"] if c["cell_type"] == "markdown"):
            for alt, where in PICTURE.findall("".join(cell["source"])):
                assert alt.startswith("Picture: ") and len(alt) > 40, (page.name, alt)
                assert where.startswith("../docs/images/"), (page.name, where)
                assert (page.path.parent / where).is_file(), (page.name, where)
                assert f"](images/{where.removeprefix('../docs/images/')})" in site
                shown += 1
    assert shown >= 1  # notebook 10's picture of the web dashboard


def test_the_figure_says_what_it_plots_for_its_alt_text():
    from labqueue.lab.assets import describe, new_figure

    fig, ax = new_figure()
    ax.set_xlabel("workers")
    ax.set_ylabel("jobs per second")
    assert describe(fig) == "Chart: jobs per second against workers"
    ax.set_title("Drain rate")
    assert describe(fig) == "Chart: Drain rate"
    assert fig._repr_png_()[1] == {"alt": "Chart: Drain rate"}


def test_every_page_says_where_to_ask_and_the_feedback_page_names_the_issues():
    assert "](feedback.md)" in build.index_text(build.pages())
    for page in build.pages():
        text = json.dumps(build.page_source(page, "ada/labqueue"))
        assert "../docs/feedback.md" not in text and "(feedback.md)" in text, page.name
    feedback = build.feedback_text("ada/labqueue")
    assert "https://github.com/ada/labqueue/issues" in feedback and "](workshop.md)" not in feedback


def test_a_guide_page_links_into_the_site_or_to_the_file_on_github():
    places = build.site_places(build.pages())
    text = (
        "[deploy](../../deploy.md#metrics), "
        "[notebook 05](../../../notebooks/05_effect_in_transaction.ipynb), [limits](concurrency-keys.md), "
        "[the API](../reference/api.md), [changes](../../../CHANGELOG.md), "
        "[the files](../../../deploy/), [a heading](#passwords), [outside](https://example.org/x.md)"
    )
    page = build.guide_source("docs/package/howto/testing.md", text, places, "ada/labqueue")
    assert page.startswith(
        "[deploy](deploy.md#metrics), [notebook 05](../../05_effect_in_transaction.ipynb), "
        "[limits](concurrency-keys.md), [the API](../reference/api.md), "
        "[changes](https://github.com/ada/labqueue/blob/HEAD/CHANGELOG.md), "
        "[the files](https://github.com/ada/labqueue/blob/HEAD/deploy), [a heading](#passwords), "
        "[outside](https://example.org/x.md)"
    )
    assert "[where to ask](../../feedback.md)" in page


def test_every_link_of_readme_and_the_guide_names_a_file_of_the_repository():
    """A link to a file that is no page of the site becomes a link to it on GitHub: it must exist."""
    from labqueue.website.reference import NAMES

    written = {f"docs/package/reference/{name}.md" for name in NAMES}  # made at build time
    broken = []
    for where in ["README.md", *build.site_places(build.pages())]:  # README, the front page, too
        if where.endswith(".md") and where not in written:
            for match in build.RELATIVE_LINK.finditer((build.ROOT / where).read_text(encoding="utf-8")):
                target = posixpath.normpath(posixpath.join(posixpath.dirname(where), match["path"]))
                if target not in written and not (build.ROOT / target).exists():
                    broken.append(f"{where}: {match['path']}")
    assert broken == []


def test_the_index_opens_the_package_section():
    text = build.index_text(build.pages())
    assert ":caption: The package · guide and reference" in text and "\npackage/index\n" in text
    assert "](package/quickstart.md)" in text and "](package/reference/index.md)" in text
