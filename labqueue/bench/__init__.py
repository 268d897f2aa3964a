"""The benchmark: labqueue's worker loop against the tutorial's statements, bare-SQLite
floors and other SQLite-backed queues, side by side (``python -m labqueue.bench``).

``run`` drives the interleaved rounds, ``contenders`` holds each queue's load / open /
drain, ``profile`` counts what one drained job costs, ``report`` prints and plots.
"""

from .report import load_results, plot_comparison, summary_frame
from .run import main

__all__ = ["load_results", "main", "plot_comparison", "summary_frame"]
