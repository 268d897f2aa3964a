"""Notebook 03's exercise: predict how long a crashed worker's job waits, then make it wait less.

The checker runs the notebook's experiment for real (two worker processes running the
tutorial's worker loop, on the learner's code when given their workspace, the first one
killed inside the handler) with the learner's lease, and compares the measured gap
between the two claims with the learner's prediction.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...errors import InvalidArgument
from .. import crash
from . import Verdict, not_yet, passed, starting_points

#: The gap the learner must get under, in seconds.
TARGET_GAP = 1.0
#: How far a prediction may be from the measured gap (the second worker's poll and start-up).
TOLERANCE = 0.3
#: The shortest lease the exercise accepts: long enough that "it comes back at once" is a wrong guess.
MIN_LEASE = 0.5


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_crash_gap(
    lease: object, predicted_gap: object, folder: str | Path | None = None, code: str | Path | None = None
) -> Verdict:
    """Kill a worker mid-job with `lease` and measure how long the job waits before the
    second worker claims it; the workers run the code in folder `code` (the notebook
    passes ws.folder, the learner's workspace). Passes when the job waits less than
    TARGET_GAP and the prediction is within TOLERANCE of the measurement."""
    if not _number(lease) or not _number(predicted_gap):
        got = f"{lease!r} and {predicted_gap!r}"
        return not_yet(f"lease and predicted_gap must be numbers of seconds, got {got}")
    if not MIN_LEASE <= lease <= 5:
        return not_yet(f"pick a lease from {MIN_LEASE:g} to 5 seconds (got {lease!r}), to keep it short")
    try:
        with tempfile.TemporaryDirectory(prefix="nb03_") as scratch:
            run = crash.crash_recovery(lease=float(lease), folder=folder or scratch, timeout=10.0, code=code)
    except (InvalidArgument, TimeoutError) as exc:
        return not_yet(f"the experiment did not finish: {exc}")
    except Exception as exc:  # a checker reports, it never raises at the learner
        return not_yet(f"the experiment failed: {type(exc).__name__}: {exc}")
    if not run.finished:
        return not_yet(
            f"w2 never claimed the job within {run.waited:g} s of w1's death: your worker's claim "
            "never took the job back. Does the lease reach your worker's JobQueue, and does your claim "
            "take a running job whose visible_at has passed?"
        )
    gap = run.gap
    measured = f"lease {lease:g} s: the job waited {gap:.2f} s between w1's claim and w2's"
    if abs(predicted_gap - gap) > TOLERANCE:
        return not_yet(
            f"{measured}, but you predicted {predicted_gap:g} s. What decides when w2 may claim the job?"
        )
    if gap >= TARGET_GAP:
        return not_yet(f"{measured}, as you predicted. Now make the job wait less than {TARGET_GAP:g} s.")
    return passed(
        f"{measured}, as you predicted: the wait after a crash is one lease. "
        "A shorter lease recovers sooner, but cuts off slow workers sooner too (notebooks 04 and 06)."
    )


CHECKERS = {"crash_gap": check_crash_gap}
#: The starting point in the notebook: the course's lease and no idea of the gap yet.
STARTERS = {"crash_gap": {"lease": 2.0, "predicted_gap": 0.0}}
#: The worked answer: the job waits one lease, so a half-second lease gives a half-second wait.
ANSWERS = {"crash_gap": {"lease": 0.5, "predicted_gap": 0.5}}
#: Wrong versions: the right prediction for a lease that is too long, and a short lease with a
#: prediction that ignores the lease (the job does not come back at once).
WRONG = {
    "crash_gap": [
        {"lease": 1.5, "predicted_gap": 1.5},
        {"lease": 0.5, "predicted_gap": 0.0},
    ]
}

starting_points(__name__)
