"""Fires per second and lateness over simulated time, as an SVG drawn by hand.

Why by hand: two panels of bars and dots need no plotting library, the SVG is
text (diffable, deterministic for a seed) and opens in any browser. A ``.png``
path is rendered with matplotlib when it is installed (``pip install
'kafkron[plot]'``); it is optional so the simulation itself needs nothing more.

Top panel: the peak fires (first attempts) per second within each column, blue
(a midnight of 20,000 jobs is a spike; with spread it is a plateau), and the peak
retries per second, orange (in lockstep without jitter, spread out with it).
Bottom panel: each first attempt's lateness (broker append minus scheduled
instant), log scale, at its scheduled time. The faulty (safety) phase is shaded.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from simulation.run import Outcome
from topics.timefmt import format_ms

WIDTH, HEIGHT = 960, 560
LEFT, RIGHT = 70, 20
PANEL_H = 200
TOP1, TOP2 = 40, 300
COLUMNS = 480
DOTS_MAX = 6000


def _peaks(outcome: Outcome, first: bool) -> list[int]:
    """Peak records per second within each column: first attempts, or retries."""
    sc = outcome.scenario
    span_ms = sc.end_ms - sc.start_ms
    per_second = Counter(
        r.append_ms // 1000 for r in outcome.evidence.runs if (r.attempt == 1) == first
    )
    peaks = [0] * COLUMNS
    for second, count in per_second.items():
        column = min(COLUMNS - 1, max(0, (second * 1000 - sc.start_ms) * COLUMNS // span_ms))
        peaks[column] = max(peaks[column], count)
    return peaks


def series(outcome: Outcome) -> tuple[list[int], list[tuple[int, int]]]:
    """(peak fires per second per column, [(scheduled_ms, lateness_ms)])."""
    peaks = _peaks(outcome, first=True)
    dots = [
        (r.scheduled_ms, r.append_ms - r.scheduled_ms)
        for r in outcome.evidence.runs
        if r.attempt == 1
    ]
    if len(dots) > DOTS_MAX:
        step = len(dots) / DOTS_MAX
        dots = [dots[int(i * step)] for i in range(DOTS_MAX)]
    return peaks, dots


def svg(outcome: Outcome) -> str:
    sc = outcome.scenario
    span_ms = sc.end_ms - sc.start_ms
    plot_w = WIDTH - LEFT - RIGHT
    peaks, dots = series(outcome)

    def x_of(instant_ms: int) -> float:
        return LEFT + (instant_ms - sc.start_ms) * plot_w / span_ms

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14">{sc.name}, seed {outcome.seed}: '
        "fires per second (peak per column) and lateness</text>",
    ]
    heal_x = x_of(sc.heal_ms)
    for top in (TOP1, TOP2):
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{heal_x - LEFT:.1f}" height="{PANEL_H}" '
            'fill="#fde8e8"/>'
        )
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" '
            'fill="none" stroke="#444"/>'
        )
    out.append(f'<text x="{LEFT + 4}" y="{TOP1 + 14}" fill="#a33">faults</text>')
    out.append(f'<text x="{heal_x + 4:.1f}" y="{TOP1 + 14}" fill="#3a3">healed</text>')
    retries = _peaks(outcome, first=False)
    peak = max(peaks + retries) or 1
    bar_w = plot_w / COLUMNS
    for i, value in enumerate(retries):  # behind the fires, in orange
        if value:
            h = value * PANEL_H / peak
            out.append(
                f'<rect x="{LEFT + i * bar_w:.1f}" y="{TOP1 + PANEL_H - h:.1f}" '
                f'width="{max(bar_w, 1):.1f}" height="{h:.1f}" fill="#dd6b20"/>'
            )
    if any(retries):
        out.append(
            f'<text x="{LEFT + plot_w - 4}" y="{TOP1 + 14}" text-anchor="end" '
            'fill="#dd6b20">retries</text>'
        )
    for i, value in enumerate(peaks):
        if value:
            h = value * PANEL_H / peak
            out.append(
                f'<rect x="{LEFT + i * bar_w:.1f}" y="{TOP1 + PANEL_H - h:.1f}" '
                f'width="{max(bar_w, 1):.1f}" height="{h:.1f}" fill="#2b6cb0"/>'
            )
    out.append(f'<text x="{LEFT - 6}" y="{TOP1 + 10}" text-anchor="end">{peak:,}/s</text>')
    out.append(f'<text x="{LEFT - 6}" y="{TOP1 + PANEL_H}" text-anchor="end">0</text>')
    top_ms = max([late for _, late in dots] + [10])
    decades = max(1, math.ceil(math.log10(top_ms + 1)))

    def y_of(late_ms: int) -> float:
        value = math.log10(max(late_ms, 0) + 1)
        return TOP2 + PANEL_H - value * PANEL_H / decades

    for d in range(decades + 1):
        y = TOP2 + PANEL_H - d * PANEL_H / decades
        label = f"{10**d:,} ms" if d else "0 ms"
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for scheduled_ms, late_ms in dots:
        colour = "#c53030" if late_ms < 0 else "#2f855a"
        out.append(
            f'<circle cx="{x_of(scheduled_ms):.1f}" cy="{y_of(late_ms):.1f}" r="1.6" '
            f'fill="{colour}"/>'
        )
    for i in range(5):
        instant = sc.start_ms + span_ms * i // 4
        x = x_of(instant)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<text x="{x:.1f}" y="{TOP2 + PANEL_H + 18}" text-anchor="{anchor}">'
            f"{format_ms(instant)[11:19]}</text>"
        )
    out.append(
        f'<text x="{LEFT}" y="{TOP2 - 8}">lateness of each first attempt '
        "(log scale; red: early)</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(outcome: Outcome, path: str | Path) -> None:
    path = Path(path)
    if path.suffix.lower() == ".svg":
        path.write_text(svg(outcome))
        return
    if path.suffix.lower() != ".png":
        raise ValueError(f"--plot {path}: name a .svg or .png file")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError(
            f"--plot {path}: PNG needs matplotlib (pip install 'kafkron[plot]'); "
            "or name a .svg file, which needs nothing"
        ) from None
    sc = outcome.scenario
    peaks, dots = series(outcome)
    retries = _peaks(outcome, first=False)
    span_s = (sc.end_ms - sc.start_ms) / 1000
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    xs = [i * span_s / COLUMNS / 60 for i in range(COLUMNS)]
    width = span_s / COLUMNS / 60
    # As the SVG: retries in orange behind the fires, early first attempts in red.
    if any(retries):
        top.bar(xs, retries, width=width, color="#dd6b20", label="retries", zorder=2)
    top.bar(xs, peaks, width=width, color="#2b6cb0", label="fires", zorder=3)
    top.set_ylabel("per second (peak)")
    top.legend(loc="upper right")
    for early, colour in ((False, "#2f855a"), (True, "#c53030")):
        chosen = [(s, late) for s, late in dots if (late < 0) == early]
        bottom.scatter(
            [(s - sc.start_ms) / 60_000 for s, _ in chosen],
            [max(late, 0) + 1 for _, late in chosen],
            s=2,
            color=colour,
            zorder=3,
        )
    bottom.set_yscale("log")
    bottom.set_ylabel("lateness + 1 (ms; red: early)")
    bottom.set_xlabel(f"minutes since {format_ms(sc.start_ms)}")
    for axis in (top, bottom):
        # zorder 0: the shading of the faulty phase stays behind the data.
        axis.axvspan(0, (sc.heal_ms - sc.start_ms) / 60_000, color="#fde8e8", zorder=0)
    fig.suptitle(f"{sc.name}, seed {outcome.seed}")
    fig.savefig(path, dpi=100)
    plt.close(fig)
