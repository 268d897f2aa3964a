"""Run notebooks top to bottom in place, keeping their outputs, as they are committed.

python -m labqueue.lab.execute notebooks/02_leases.ipynb [...]

A committed widget panel keeps its live form for JupyterLab (the widget-view output and,
in the notebook's metadata, the state of every widget), and gets two static stand-ins
for every place that cannot run it (GitHub, nbviewer, a terminal): a short text line
instead of ``VBox(children=(HBox(...`` and an HTML picture of the panel as it was saved,
its buttons, slider values, tables and chart.
"""

from __future__ import annotations

import base64
import html
import re
import sys
import time
from pathlib import Path
from typing import Any

from .assets import png_description

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PANEL_TEXT = "[Interactive panel: run this notebook in JupyterLab to use it]"
PANEL_NOTE = (
    "<p style='color:#666;font-size:90%'><i>Interactive panel, shown as it was when the notebook was "
    "saved: run the notebook in JupyterLab to use it.</i></p>"
)
# A saved panel's chart whose PNG does not say what it plots (drawn before figure_png said so).
PANEL_CHART = "Chart in the panel, as it was saved"
_REF = "IPY_MODEL_"
_PROGRESS = {"FloatProgressModel", "IntProgressModel"}
_CONTROLS = {"ButtonModel", "TextModel", "DropdownModel", "ToggleButtonsModel", "CheckboxModel"}


def execute(path: Path, timeout: int = 600) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
    ).execute()
    seconds = time.perf_counter() - started
    add_static_panels(nb)
    nbformat.write(nb, path)
    return seconds


def widget_states(nb: Any) -> dict[str, dict]:
    """Every widget model the notebook saved, by id: {'model_name': ..., 'state': ..., 'buffers': ...}."""
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def add_static_panels(nb: Any) -> int:
    """Give every widget output a readable text line and a static HTML picture of the saved
    panel; the widget-view output stays, so JupyterLab still shows the live panel. Returns
    how many outputs it changed."""
    models = widget_states(nb)
    changed = 0
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.get(WIDGET_VIEW)
            if not view:
                continue
            model_id = view.get("model_id", "")
            names = _model_names(model_id, models)
            progress = names & _PROGRESS and not names & (_CONTROLS | {"IntSliderModel", "FloatSliderModel"})
            data["text/plain"] = _progress_text(model_id, models) if progress else PANEL_TEXT
            if model_id in models:
                data["text/html"] = ("" if progress else PANEL_NOTE) + _html(model_id, models)
            changed += 1
    return changed


def _children(model: dict) -> list[str]:
    kids = model.get("state", {}).get("children", [])
    return [k[len(_REF) :] for k in kids if isinstance(k, str) and k.startswith(_REF)]


def _model_names(model_id: str, models: dict[str, dict]) -> set[str]:
    model = models.get(model_id)
    if model is None:
        return set()
    names = {model.get("model_name", "")}
    for child in _children(model):
        names |= _model_names(child, models)
    return names


def _texts(model_id: str, models: dict[str, dict]) -> list[str]:
    model = models.get(model_id, {})
    state = model.get("state", {})
    found = []
    if model.get("model_name") in ("HTMLModel", "LabelModel"):
        text = html.unescape(re.sub(r"<[^>]+>", "", str(state.get("value", "")))).strip()
        if text:
            found.append(text)
    for child in _children(model):
        found += _texts(child, models)
    return found


def _progress_text(model_id: str, models: dict[str, dict]) -> str:
    return " ".join(_texts(model_id, models)) or "[progress bar]"


def _html(model_id: str, models: dict[str, dict]) -> str:
    """The saved state of one widget, drawn as plain HTML."""
    model = models.get(model_id)
    if model is None:
        return ""
    name = model.get("model_name", "")
    state = model.get("state", {})
    label = html.escape(str(state.get("description", "")))
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel", "AccordionModel", "TabModel"):
        direction = "row" if name == "HBoxModel" else "column"
        inner = "".join(_html(child, models) for child in _children(model))
        return f"<div style='display:flex;flex-direction:{direction};gap:6px;flex-wrap:wrap'>{inner}</div>"
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<div>{state.get('value', '')}</div>"
    if name == "LabelModel":
        return f"<div>{html.escape(str(state.get('value', '')))}</div>"
    if name in ("ButtonModel", "ToggleButtonModel"):
        return f"<span style='border:1px solid #aaa;border-radius:3px;padding:1px 8px'>{label}</span>"
    if name in _PROGRESS:
        share = 100 * float(state.get("value", 0)) / (float(state.get("max", 0)) or 1.0)
        return f"<span>[{'#' * round(share / 10):-<10}] {share:.0f}%</span>"
    if name == "ImageModel":
        for buffer in model.get("buffers", []):
            if buffer.get("path") == ["value"] and buffer.get("encoding") == "base64":
                kind = html.escape(str(state.get("format", "png")))
                alt = html.escape(
                    png_description(base64.b64decode(buffer["data"])) or PANEL_CHART, quote=True
                )
                where = f"data:image/{kind};base64,{buffer['data']}"
                return f"<img style='max-width:100%' alt='{alt}' src='{where}'>"
        return ""
    if name in ("DropdownModel", "SelectModel", "ToggleButtonsModel", "RadioButtonsModel"):
        labels = state.get("_options_labels", [])
        index = state.get("index")
        value = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else ""
        return f"<span>{label}: <b>{html.escape(str(value))}</b></span>"
    if name == "OutputModel":
        parts = []
        for out in state.get("outputs", []):
            data = out.get("data", {})
            if "text/html" in data:
                parts.append(str(data["text/html"]))
            elif "text/plain" in data or "text" in out:
                parts.append(f"<pre>{html.escape(str(data.get('text/plain', out.get('text', ''))))}</pre>")
        return "".join(parts)
    if "value" in state and not name.endswith("StyleModel") and name != "LayoutModel":
        return f"<span>{label}: <b>{html.escape(str(state['value']))}</b></span>"
    return ""


def main(argv: list[str]) -> int:
    for name in argv:
        seconds = execute(Path(name))
        print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
