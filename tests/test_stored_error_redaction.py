"""A job's stored last_error holds no password: a handler whose exception quotes a database
URL, a password parameter, or the bare password of a location the queue knows (its own URL
on PostgreSQL, one given to keep_secret()) is stored masked, on both backends, through the
worker's path and through fail(); so `labqueue job`, the dashboard and the logs that read the
row cannot show it."""

from __future__ import annotations

from labqueue.core import MAX_ERROR_CHARS, stored_error
from labqueue.worker import handle

SECRET = "hunter2-Zq9x"


def failing(message: str):
    def handler(job, q):
        raise RuntimeError(message)

    return handler


def test_a_handler_error_quoting_a_url_is_stored_without_its_password(make_queue):
    q = make_queue()
    job_id = q.enqueue("sync", {})
    [job] = q.claim("w")
    message = f"could not connect to postgresql://app:{SECRET}@db.internal:5432/billing: refused"
    assert handle(q, job, {"sync": failing(message)}) == "queued"
    stored = q.job(job_id).last_error
    assert SECRET not in stored
    assert stored.startswith(
        "RuntimeError: could not connect to postgresql://app:***@db.internal:5432/billing"
    )


def test_the_passwords_of_known_locations_are_masked_where_quoted_alone(make_queue):
    q = make_queue()
    q.keep_secret(f"postgresql://app:{SECRET}@db/jobs")
    first, second = q.enqueue("a", {}), q.enqueue("b", {})
    jobs = {j.id: j for j in q.claim("w", limit=2)}
    q.fail(jobs[first], f'invalid percent-encoded token: "{SECRET}"', retry=False)
    q.fail(jobs[second], f"host=db password={SECRET} dbname=jobs", retry=False)
    for job_id in (first, second):
        assert SECRET not in q.job(job_id).last_error
    assert q.job(first).last_error == 'invalid percent-encoded token: "***"'


def test_a_pause_reason_and_a_crash_note_are_masked_too(make_queue):
    q = make_queue()
    q.pause("mail", reason=f"smtp://relay:{SECRET}@mail.example is down")
    assert SECRET not in q.paused()["mail"]["reason"]


def test_masking_comes_before_the_cut():
    # cut first, the URL would end inside its password, with no "@" left to tell user info
    padded = "x" * (MAX_ERROR_CHARS - 22) + f" postgresql://app:{SECRET}@db/jobs"
    stored = stored_error(padded)
    assert len(stored) == MAX_ERROR_CHARS and SECRET[:4] not in stored


def test_the_workers_log_lines_mask_it_too(make_queue):
    import io
    import logging

    from labqueue.joblog import JsonFormatter, TextFormatter

    q = make_queue()
    q.enqueue("sync", {})
    [job] = q.claim("w")
    outputs = {}
    logger = logging.getLogger("labqueue.worker")
    handlers = []
    for name, formatter in (("text", TextFormatter()), ("json", JsonFormatter())):
        outputs[name] = io.StringIO()
        handler = logging.StreamHandler(outputs[name])
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        handlers.append(handler)
    try:
        handle(q, job, {"sync": failing(f"cannot reach postgresql://app:{SECRET}@db/x")})
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
    for name, out in outputs.items():
        text = out.getvalue()
        assert "cannot reach postgresql://app:***@db/x" in text, name
        assert SECRET not in text, name  # the message and the traceback below it
