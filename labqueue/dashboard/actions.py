"""What the dashboard's forms do, through the queue's own API: requeue dead jobs (one, those
of a queue and/or kind, or all), cancel a job, pause and resume a named queue. Each returns
the sentence the result page shows. The server calls them only for a POST with the CSRF
token, and only when the dashboard was started with --allow-actions."""

from __future__ import annotations

from typing import Any

from .reading import Refused

ACTIONS = ("requeue", "cancel", "pause", "resume")


def run(q: Any, action: str, form: dict[str, str]) -> str:
    if action == "requeue":
        return requeue(q, form)
    if action == "cancel":
        job_id = _id(form.get("id"))
        return f"Job {job_id} cancelled (it was {q.cancel(job_id)})."
    if action == "pause":
        name = _queue(form)
        if q.pause(name, reason=form.get("reason") or None):
            return f"Queue {name!r} paused: workers leave its jobs alone until it is resumed."
        return f"Queue {name!r} was paused already."
    if action == "resume":
        name = _queue(form)
        return f"Queue {name!r} resumed." if q.resume(name) else f"Queue {name!r} was not paused."
    raise Refused(f"no such action {action!r}: one of {', '.join(ACTIONS)}")


def requeue(q: Any, form: dict[str, str]) -> str:
    """One dead job (id), the dead jobs of a queue and/or kind, or every one (all=1)."""
    if form.get("id"):
        job_id = _id(form["id"])
        done = q.requeue_dead([job_id])
        if not done:
            record = q.job(job_id)
            why = "no job has this id" if record is None else f"it is {record.state}, not dead"
            raise Refused(f"job {job_id} was not requeued: {why}")
        return f"Job {job_id} requeued."
    queue, kind = form.get("queue") or None, form.get("kind") or None
    if queue is None and kind is None and form.get("all") != "1":
        raise Refused("say which dead jobs: an id, a queue and/or a kind, or all")
    ids = None if queue is None and kind is None else [
        r.id for r in q.jobs(state="dead", kind=kind, queue=queue)
    ]  # fmt: skip
    done = q.requeue_dead(ids)
    return f"{len(done)} dead job(s) requeued." if done else "No dead job matched: nothing was requeued."


def _id(text: str | None) -> int:
    if not text or not text.isascii() or not text.isdigit() or len(text) > 18:
        raise Refused(f"a job id is a whole number, got {text!r}")
    return int(text)


def _queue(form: dict[str, str]) -> str:
    name = form.get("queue")
    if not name:
        raise Refused("which queue? (the form's queue field is empty)")
    return name
