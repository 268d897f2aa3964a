"""Committed panels read as panels where no kernel runs them (GitHub, nbviewer)."""

from __future__ import annotations

import base64

from labqueue.lab import execute

VIEW = execute.WIDGET_VIEW


def _nb(models, outputs):
    return {
        "metadata": {"widgets": {execute.WIDGET_STATE: {"state": models}}},
        "cells": [{"cell_type": "code", "source": "panel()", "outputs": outputs}],
    }


def _model(name, **state):
    return {"model_name": name, "state": state}


def _out(model_id, text):
    return {"output_type": "execute_result", "data": {VIEW: {"model_id": model_id}, "text/plain": text}}


def test_a_panel_gets_a_readable_line_and_a_static_picture():
    png = base64.b64encode(b"\x89PNG fake").decode()
    models = {
        "box": _model("VBoxModel", children=[f"IPY_MODEL_{k}" for k in ("row", "go", "msg", "img")]),
        "row": _model("HBoxModel", children=["IPY_MODEL_jobs"]),
        "jobs": _model("IntSliderModel", description="jobs", value=4000),
        "go": _model("ButtonModel", description="Run the race"),
        "msg": _model("HTMLModel", value="naive made <b>12</b> duplicates"),
        "img": {
            **_model("ImageModel", format="png"),
            "buffers": [{"path": ["value"], "encoding": "base64", "data": png}],
        },
    }
    nb = _nb(models, [_out("box", "VBox(children=(HBox(children=(IntSlider(...")])
    assert execute.add_static_panels(nb) == 1
    data = nb["cells"][0]["outputs"][0]["data"]
    assert data["text/plain"] == execute.PANEL_TEXT
    page = data["text/html"]
    assert "jobs: <b>4000</b>" in page and "Run the race" in page and "<b>12</b>" in page
    assert f"base64,{png}" in page
    assert data[VIEW] == {"model_id": "box"}  # JupyterLab still shows the live panel


def test_a_progress_bar_reads_as_its_final_text():
    models = {
        "bar": _model("HBoxModel", children=["IPY_MODEL_a", "IPY_MODEL_p", "IPY_MODEL_b"]),
        "a": _model("HTMLModel", value="4000 jobs: 100%"),
        "p": _model("FloatProgressModel", value=3, max=3),
        "b": _model("HTMLModel", value=" 3/3 [00:03&lt;00:00]"),
    }
    nb = _nb(models, [_out("bar", "4000 jobs:   0%|")])
    execute.add_static_panels(nb)
    data = nb["cells"][0]["outputs"][0]["data"]
    assert data["text/plain"] == "4000 jobs: 100% 3/3 [00:03<00:00]"
    assert "100%" in data["text/html"] and "Interactive panel" not in data["text/html"]


def test_a_panel_without_saved_state_still_loses_the_raw_repr():
    nb = _nb({}, [_out("gone", "VBox(children=(...")])
    execute.add_static_panels(nb)
    assert nb["cells"][0]["outputs"][0]["data"]["text/plain"] == execute.PANEL_TEXT


def test_a_saved_panels_chart_is_described_by_what_it_plots():
    from labqueue.lab.assets import figure_png, new_figure

    fig, ax = new_figure()
    ax.set_ylabel("jobs per second")
    ax.set_xlabel("workers")
    drawn = base64.b64encode(figure_png(fig)).decode()
    bare = base64.b64encode(figure_png(new_figure()[0])).decode()  # says nothing of itself
    models = {
        "box": _model("VBoxModel", children=["IPY_MODEL_a", "IPY_MODEL_b"]),
        "a": {
            **_model("ImageModel", format="png"),
            "buffers": [{"path": ["value"], "encoding": "base64", "data": drawn}],
        },
        "b": {
            **_model("ImageModel", format="png"),
            "buffers": [{"path": ["value"], "encoding": "base64", "data": bare}],
        },
    }
    nb = _nb(models, [_out("box", "VBox(...)")])
    execute.add_static_panels(nb)
    page = nb["cells"][0]["outputs"][0]["data"]["text/html"]
    assert "alt='Chart: jobs per second against workers'" in page
    assert f"alt='{execute.PANEL_CHART}'" in page  # only where the chart said nothing
