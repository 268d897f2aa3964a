"""The chaos harness: workers SIGKILLed and SIGSTOPped at random while they drain a mix
of demo jobs, then every invariant checked (``python -m labqueue.chaos``).

``supervisor`` holds the configuration, the supervisor and the command line; ``check`` reads
the finished store back and says which invariant held or broke.
"""

from .check import Check, JobRow, check_run, figures
from .supervisor import ChaosConfig, ChaosResult, Supervisor, main, run

__all__ = [
    "ChaosConfig",
    "ChaosResult",
    "Check",
    "JobRow",
    "Supervisor",
    "check_run",
    "figures",
    "main",
    "run",
]
