"""The state diagram and the code agree: its states are the schema's, and its moves are
exactly the ones the queue's SQL statements make."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from labqueue import InvalidArgument, queue
from labqueue.drivers.sqlite import sql
from labqueue.lab import assets, states

NOW = 1000.0


def test_the_diagram_draws_the_schemas_states():
    check = re.search(r"CHECK \((state = .*)\),", sql.TABLE).group(1)
    in_schema = tuple(re.findall(r"state = '(\w+)'", check))
    assert in_schema == queue.STATES
    drawn = {e.source for e in states.EDGES} | {e.target for e in states.EDGES}
    assert drawn - {states.START} == set(queue.STATES)
    fig = states.diagram()
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert set(queue.STATES) <= texts


def _rows():
    """One row for every state, with attempts left or not, visible or not."""
    rows = []
    for state in queue.STATES:
        for attempts in (1, 5):
            for visible_at in (NOW - 100, NOW + 100):
                rows.append((state, attempts, visible_at))
    return rows


def _fresh():
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(sql.SCHEMA)
    db.executemany(
        "INSERT INTO jobs (kind, payload, state, attempts, max_attempts, visible_at, lease_token, created_at)"
        " VALUES ('k', '{}', ?, ?, 5, ?, 'tok', 0)",
        _rows(),
    )
    return db


def _each_row(statement, params):
    def run(db):
        for (job_id,) in db.execute("SELECT id FROM jobs").fetchall():
            db.execute(statement, params(job_id)).fetchall()

    return run


def _once(statement, params):
    return lambda db: db.execute(statement, params).fetchall()


CLAIM_PARAMS = {"now": NOW, "lease_end": NOW + 30, "token": "new", "worker": "w", "limit": 100, "reason": "r"}
ENQUEUE_ROW = ("k", "{}", 5, NOW, None, NOW, 0, "default", None, None)

# How to run each of the queue's writing statements; a new one must be added here (and drawn).
RUNS = {
    "ENQUEUE": [_once(sql.ENQUEUE, ENQUEUE_ROW)],
    "ENQUEUE_MANY": [
        lambda db: db.executemany(sql.ENQUEUE_MANY, [(*ENQUEUE_ROW[:4], NOW, 0, "default", None, None)])
    ],
    "CANCEL": [_each_row(sql.CANCEL, lambda i: {"now": NOW, "id": i})],
    # Copies finished rows to jobs_archive: no job changes state (the DELETE beside it removes rows).
    "PURGE_ARCHIVE": [
        _once(sql.PURGE_ARCHIVE, {"after": 0, "batch": 100, "states": '["done"]', "before": NOW, "now": NOW})
    ],
    "RETIRE_EXHAUSTED": [_once(sql.RETIRE_EXHAUSTED, {"now": NOW, "reason": "r"})],
    "CLAIM": [_once(sql.CLAIM, CLAIM_PARAMS)],
    "CLAIM_IDS": [_once(sql.claim_ids(16), (NOW + 30, "new", "w", NOW, *range(1, 17)))],
    "CLAIM_ID_RUN": [_once(sql.CLAIM_ID_RUN, (NOW + 30, "new", "w", NOW, 1, 16))],
    "COMPLETE": [_each_row(sql.COMPLETE, lambda i: (NOW, i, "tok"))],
    "COMPLETE_RESULT": [_each_row(sql.COMPLETE_RESULT, lambda i: (NOW, i, "tok", '"value"'))],
    "FAIL": [
        _each_row(
            sql.FAIL,
            lambda i, final=final: {
                "final": final,
                "retry_at": NOW + 5,
                "now": NOW,
                "error": "e",
                "id": i,
                "token": "tok",
                "outcome": "failed",
                "error_class": None,
                "message": "e",
                "traceback": None,
            },
        )
        for final in (0, 1)
    ],
    "HEARTBEAT": [_each_row(sql.HEARTBEAT, lambda i: (NOW + 30, i, "tok", NOW))],
    "RELEASE": [_each_row(sql.RELEASE, lambda i: {"now": NOW, "id": i, "token": "tok"})],
    "COMPLETE_MANY": [_once(sql.complete_many(16), (NOW, *range(1, 17), "tok"))],
    "COMPLETE_ID_RUN": [_once(sql.COMPLETE_ID_RUN, (NOW, 1, 16, "tok"))],
    "PUT_BACK": [
        _each_row(sql.PUT_BACK, lambda i: {"now": NOW, "delay": 10, "note": "n", "id": i, "token": "tok"})
    ],
    # NOTE_CRASH writes a note only, PAUSE a row of queue_pauses: neither moves a job.
    "NOTE_CRASH": [
        _once(
            sql.NOTE_CRASH,
            {"worker": "w", "message": "m", "running": None, "running_message": "r", "now": NOW},
        )
    ],
    "PAUSE": [_once(sql.PAUSE, {"queue": "mail", "now": NOW, "reason": None})],
    "REQUEUE_DEAD": [_once(sql.REQUEUE_DEAD, (NOW,))],
    "REQUEUE_DEAD_IDS": [_once(sql.REQUEUE_DEAD_IDS, (NOW, json.dumps(list(range(1, 17)))))],
}
if hasattr(sql, "BURY"):  # a claimed row that cannot be read goes straight to the dead letters
    RUNS["BURY"] = [_each_row(sql.BURY, lambda i: {"now": NOW, "reason": "r", "id": i, "token": "tok"})]


def moves_made_by(name):
    """(from, to) for every row a statement inserted, changed state, or leased anew."""
    made = set()
    for run in RUNS[name]:
        db = _fresh()
        before = {i: (s, t) for i, s, t in db.execute("SELECT id, state, lease_token FROM jobs")}
        run(db)
        for i, state, token in db.execute("SELECT id, state, lease_token FROM jobs"):
            if i not in before:
                made.add((states.START, state))
            elif before[i] != (state, token) and not (state == before[i][0] and token is None):
                made.add((before[i][0], state))
    return made


def writing_statements():
    return sorted(
        name
        for name, value in vars(sql).items()
        # _CLAIM and _CLAIM_IDS are the templates of CLAIM (and its scopes) and claim_ids()
        if name.isupper()
        and not name.startswith("_")
        and isinstance(value, str)
        and value.lstrip().startswith(("UPDATE", "INSERT"))
    )


def test_every_writing_statement_is_known_to_this_test():
    assert writing_statements() == sorted(RUNS)


@pytest.mark.parametrize("edge", states.EDGES, ids=lambda e: e.key)
def test_each_drawn_move_is_made_by_the_statements_it_names(edge):
    for name in edge.statements:
        if not hasattr(sql, name):
            continue  # drawn ahead of a statement not yet in this checkout
        assert (edge.source, edge.target) in moves_made_by(name), name


def test_the_statements_make_no_move_that_is_not_drawn():
    made = set().union(*(moves_made_by(name) for name in RUNS))
    assert made == {(e.source, e.target) for e in states.EDGES}
    assert states.transitions() == made - {(states.START, "queued")}


def test_diagram_has_the_course_size_and_highlights_by_name():
    fig = states.diagram(highlight=["reclaim", "running"])
    assert tuple(fig.get_size_inches()) == assets.FIGSIZE
    assert assets.figure_png(fig).startswith(b"\x89PNG")
    with pytest.raises(InvalidArgument, match="'sleeping'"):
        states.diagram(highlight="sleeping")


def test_part1_diagram_leaves_out_what_part2_adds():
    fig = states.diagram(highlight=["claim", "complete"], part2=False)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts + fig.texts)
    assert {"queued", "running", "done", "dead"} <= set(texts.split())
    assert "cancel" not in texts and "4 states" in texts
    with pytest.raises(InvalidArgument, match="'cancel'"):
        states.diagram(highlight="cancel", part2=False)
    whole = " ".join(t.get_text() for t in states.diagram().axes[0].texts)
    assert "cancelled" in whole


def test_edges_frame_lists_every_move_once():
    table = states.edges_frame()
    assert list(table.index) == list(states.EDGE_KEYS)
    assert table.loc["requeue", "SQL (labqueue.drivers.sqlite.sql)"] == "REQUEUE_DEAD, REQUEUE_DEAD_IDS"


def test_importing_states_and_drawing_leave_pyplot_alone():
    import subprocess
    import sys

    code = (
        "import sys; from labqueue.lab import states; states.diagram(highlight='claim');"
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_panel_draws_the_chosen_move_or_state():
    panel = states.DiagramPanel()
    first = bytes(panel.image.value)
    assert first.startswith(b"\x89PNG") and "Every state" in panel.text.value
    panel.choice.value = "reclaim"
    assert bytes(panel.image.value) != first and "new token" in panel.text.value
    panel.choice.value = "state:dead"
    assert "dead letter" in panel.text.value
    assert {key for _, key in panel.choice.options} >= set(states.EDGE_KEYS)


def test_every_move_and_state_is_explained():
    assert set(states.MOVES_EXPLAINED) == set(states.EDGE_KEYS)
    assert set(states.STATES_EXPLAINED) == set(queue.STATES)


def test_part1s_table_and_panel_name_only_the_tutorial_queues_moves():
    from labqueue.tutorial import jobqueue

    table = states.edges_frame(part2=False)
    assert "cancel" not in table.index and "cancelled" not in set(table["to"])
    assert list(table.columns)[-1] == "in your queue"
    named = {call.split("(")[0].strip() for cell in table["in your queue"] for call in cell.split(";")}
    assert named <= set(dir(jobqueue.JobQueue)), named
    for statement in ("CLAIM", "FAIL", "RETIRE_EXHAUSTED"):
        assert hasattr(jobqueue, statement)
    panel = states.DiagramPanel(part2=False)
    labels = [label for label, _ in panel.choice.options]
    assert not any("cancel" in label for label in labels)
    panel.show("state:dead")
    assert panel.text.value == states.STATES_EXPLAINED["dead"]
