from __future__ import annotations

import pytest

from labqueue.lab import assets, chaos, claim_index, race_view, throughput, zombie


@pytest.mark.parametrize(
    "name",
    [
        chaos.DATA_FILE,
        claim_index.TUTORIAL_CSV,
        race_view.DATA_FILE,
        throughput.DATA_FILE,
        zombie.DATA_FILE,
    ],
)
def test_every_lab_finds_its_tutorial_figures(name):
    path = assets.data_file(name)
    assert path.parent.name == "data" and path.is_file()


def test_a_missing_data_file_is_named():
    with pytest.raises(FileNotFoundError, match=r"data/no_such_figures\.csv"):
        assets.data_file("no_such_figures.csv")


def test_data_file_falls_back_to_the_folder_above_the_notebook(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "only_here.csv").write_text("a\n1\n")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert assets.data_file("only_here.csv") == (tmp_path / "data" / "only_here.csv").resolve()


def test_figure_png_is_a_png_image():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1))
    fig.subplots().plot([0, 1], [1, 0])
    assert assets.figure_png(fig).startswith(b"\x89PNG\r\n\x1a\n")


def test_new_figure_has_the_course_size_and_is_not_kept_by_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig, ax = assets.new_figure()
    assert tuple(fig.get_size_inches()) == assets.FIGSIZE == (6.4, 3.2)
    assert fig.dpi == assets.DPI == 100
    assert plt.get_fignums() == before  # nothing to close, never shown twice
    ax.plot([0, 1], [0, 1])
    png = assets.figure_png(fig)
    assert png[16:24] == (640).to_bytes(4, "big") + (320).to_bytes(4, "big")


def test_new_figure_passes_grids_on_and_has_a_tall_variant():
    fig, axes = assets.new_figure(1, 2, sharey=True)
    assert len(axes) == 2
    fig, axes = assets.new_figure(2, 1, tall=True)
    assert fig.get_size_inches()[0] == assets.FIGSIZE[0] and len(axes) == 2


def test_importing_assets_leaves_matplotlib_alone():
    import subprocess
    import sys

    code = (
        "import sys, matplotlib as m;"
        "snap = lambda: {k: dict.__getitem__(m.rcParams, k) for k in dict.keys(m.rcParams)};"
        "before = snap(); import labqueue.lab.assets as a; a.new_figure();"
        "assert 'matplotlib.pyplot' not in sys.modules; assert snap() == before"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_course_figure_draws_itself_as_png_without_pyplot():
    fig, ax = assets.new_figure()
    ax.plot([0, 1], [0, 1])
    png, metadata = fig._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and metadata == {}  # nothing to say: no alt text
    ax.set_title("Drain rate")
    assert fig._repr_png_()[1] == {"alt": "Chart: Drain rate"}
