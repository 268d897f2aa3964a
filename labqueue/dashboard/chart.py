"""The overview's chart: jobs finished per step of the last hour, as inline SVG.

One bar per step (a minute), stacked by final state: done, then cancelled, then dead.
Plain SVG in the page (no script, no library), readable with JavaScript off; each bar
has a <title> a browser shows on hover and a screen reader reads.
"""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 720, 160
LEFT, BOTTOM, TOP = 44, 22, 10
# Stacking order, bottom up, and each state's CSS class (dashboard.css colours them).
STATES = ("done", "cancelled", "dead")


def throughput_svg(per_state: dict[str, list[int]], step: float, steps: int) -> str:
    """`per_state`: counts per step for each final state, the oldest step first (as
    Queue.throughput() sums them over every queue); `steps` bars of `step` seconds."""
    totals = [sum(per_state.get(state, [0] * steps)[i] for state in STATES) for i in range(steps)]
    peak = max(totals, default=0)
    scale = max(peak, 1)
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    bar_w = plot_w / steps
    minutes = round(steps * step / 60)
    label = f"Jobs finished per {step:g} s over the last {minutes} minutes; the most in one step: {peak}"
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(label)}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 4}" y2="{TOP + plot_h}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{peak}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end">0</text>',
        f'<text class="tick" x="{LEFT}" y="{HEIGHT - 6}">{minutes} min ago</text>',
        f'<text class="tick" x="{WIDTH - 4}" y="{HEIGHT - 6}" text-anchor="end">now</text>',
    ]
    for i, total in enumerate(totals):
        if not total:
            continue
        x = LEFT + i * bar_w
        y = float(TOP + plot_h)
        ago = (steps - 1 - i) * step
        parts = []
        for state in STATES:
            n = per_state.get(state, [0] * steps)[i]
            if not n:
                continue
            h = plot_h * n / scale
            y -= h
            parts.append(
                f'<rect class="bar {state}" x="{x + 0.5:.1f}" y="{y:.1f}" '
                f'width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}"/>'
            )
        counts = ", ".join(f"{per_state[s][i]} {s}" for s in STATES if per_state.get(s, [0] * steps)[i])
        when = "in the last step" if ago == 0 else f"{ago:g} s to {ago + step:g} s ago"
        out.append(f"<g><title>{escape(f'{counts} ({when})')}</title>{''.join(parts)}</g>")
    out.append("</svg>")
    return "\n".join(out)


def summed(per_queue: dict[str, dict[str, list[int]]], steps: int) -> dict[str, list[int]]:
    """Queue.throughput()'s counts added up over every queue, per final state."""
    total: dict[str, list[int]] = {}
    for states in per_queue.values():
        for state, counts in states.items():
            into = total.setdefault(state, [0] * steps)
            for i, n in enumerate(counts):
                into[i] += n
    return total
