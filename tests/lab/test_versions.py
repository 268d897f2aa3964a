import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.lab import versions


def test_parse_version_accepts_two_or_three_parts():
    assert versions.parse_version("3.40.1") == (3, 40, 1)
    assert versions.parse_version(" 3.51 ") == (3, 51, 0)


@pytest.mark.parametrize("text", ["", "three", "3", "3.40.1.2", None])
def test_parse_version_names_the_bad_value(text):
    with pytest.raises(InvalidArgument, match=r"3\.45\.1"):
        versions.parse_version(text)


def test_report_for_a_typed_version():
    old = versions.report_for("3.34.1")
    assert (old.returning, old.wal_reset_fix) == (False, False)
    backport = versions.report_for("3.44.6")
    assert (backport.returning, backport.wal_reset_fix) == (True, True)
    assert versions.report_for("3.45.0").wal_reset_fix is False
    assert versions.report_frame(backport).loc["RETURNING (SQLite 3.35.0+)", "present"] == "yes"


def test_plot_marks_every_milestone():
    fig = versions.plot_versions((3, 40, 1))
    ax = fig.axes[0]
    assert len(ax.lines) == len(versions.MILESTONES) + 1  # plus this build
    assert ax.get_xlabel()
    plt.close(fig)


def test_panel_updates_when_a_version_is_typed():
    panel = versions.VersionPanel()
    assert "RETURNING" in panel.table.value  # something to read at once
    panel.text.value = "3.34.0"
    assert "the queue cannot run" in panel.table.value
    panel.text.value = "3.51.3"
    assert "safe for several processes" in panel.table.value
    panel.text.value = "latest"
    assert "'latest'" in panel.table.value


def test_report_table_wraps_long_cells_and_reads_as_text():
    report = versions.report_for("3.40.1")
    page = versions.report_table(report)._repr_html_()
    assert "white-space:normal" in page and "pysqlite3-binary" in page
    assert "RETURNING (SQLite 3.35.0+)" in repr(versions.report_table(report))


def test_panel_says_interrupted(monkeypatch):
    panel = versions.VersionPanel()

    def interrupted(text):
        raise KeyboardInterrupt

    monkeypatch.setattr(panel, "update", interrupted)
    panel.text.value = "3.45.1"
    assert "interrupted" in panel.table.value
