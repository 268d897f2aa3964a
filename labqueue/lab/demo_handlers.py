"""The demo handlers, under the name the course and its notebooks use. They live in
labqueue.demo.handlers, which the tools share; a worker loads them with either name
(``--handlers labqueue.lab.demo_handlers`` or ``labqueue.demo.handlers``)."""

from ..demo.handlers import (
    DEMO_HANDLERS,
    HANDLERS,
    LEDGER_INSERT,
    LEDGER_INSERT_PG,
    LEDGER_TABLE,
    bad,
    credit,
    email,
    ledger_effect,
    noop,
    poison,
    report,
    slow,
    start_demo_worker,
)

__all__ = [
    "DEMO_HANDLERS",
    "HANDLERS",
    "LEDGER_INSERT",
    "LEDGER_INSERT_PG",
    "LEDGER_TABLE",
    "bad",
    "credit",
    "email",
    "ledger_effect",
    "noop",
    "poison",
    "report",
    "slow",
    "start_demo_worker",
]
