"""Fairness between named queues: a worker that serves several queues takes turns.

Within one queue the claim is strict: the highest priority first, then the oldest job.
Across queues that rule alone lets a flood of high-priority jobs in one queue starve
every other queue. So a worker given several queues claims each batch from one queue
at a time, in a weighted round robin: with weights mail=3 and reports=1, out of every
four claims three look at mail first and one at reports first. When the queue whose
turn it is has nothing ready, the worker tries the next in turn order, so no capacity
is left idle while any of its queues has work.

What it guarantees: under overload each queue gets at least weight / sum(weights) of the
claims (its share), however the others flood; an idle queue's share goes to the rest.
What it does not: priorities are not compared across queues (a queue is the unit of
fairness), and the share is of claims, not of CPU time (a queue of slow jobs holds
workers longer per claim). River and Oban give each queue its own worker slots (a
per-queue concurrency limit); Solid Queue polls queues in a fixed order (strict, with
starvation by design). Turns need no configuration per queue and leave no slot idle.

The order is smooth weighted round robin (as nginx balances upstreams): each turn every
queue gains its weight, the queue with the most credit goes first and pays the total.
It spreads a queue's turns out instead of bunching them (mail, reports, mail, mail, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import validate
from .errors import InvalidArgument

__all__ = ["QueueTurns", "parse_queues"]

MAX_WEIGHT = 1000


class QueueTurns:
    """The order in which a worker serving `queues` tries them, claim after claim."""

    def __init__(self, queues: Sequence[str], weights: Mapping[str, int] | None = None) -> None:
        names = validate.queue_names(queues)
        if names is None:
            raise InvalidArgument("QueueTurns needs the names of the queues it takes turns between, got None")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise InvalidArgument(f"weights name queues that are not served: {', '.join(unknown)}")
        self.queues = names
        self.weights = {
            name: validate.whole(f"weight of queue {name!r}", weights.get(name, 1), low=1, high=MAX_WEIGHT)
            for name in names
        }
        self._total = sum(self.weights.values())
        self._credit = dict.fromkeys(names, 0)

    def order(self) -> list[str]:
        """The queues to try for the next claim: the one whose turn it is first, then the
        rest, best credit first. Each call is one turn."""
        for name in self.queues:
            self._credit[name] += self.weights[name]
        ranked = sorted(self.queues, key=lambda name: -self._credit[name])  # stable: ties keep list order
        self._credit[ranked[0]] -= self._total
        return ranked

    def __repr__(self) -> str:
        return f"QueueTurns({', '.join(f'{n}:{w}' for n, w in self.weights.items())})"


def parse_queues(text: str) -> tuple[list[str], dict[str, int]]:
    """`labqueue worker --queues mail:3,reports`: names in order, and their weights
    (1 where none is given). Raises InvalidArgument naming the bad part."""
    names: list[str] = []
    weights: dict[str, int] = {}
    for part in text.split(","):
        name, colon, weight = part.strip().partition(":")
        if not name:
            raise InvalidArgument(f"--queues needs comma-separated queue names, got {text!r}")
        if colon:
            try:
                weights[name] = int(weight)
            except ValueError:
                raise InvalidArgument(
                    f"the weight of queue {name!r} must be a whole number, got {weight!r}"
                ) from None
            validate.whole(f"weight of queue {name!r}", weights[name], low=1, high=MAX_WEIGHT)
        names.append(name)
    validate.queue_names(names)
    return names, weights
