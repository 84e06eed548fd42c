"""Fires per second and lateness over simulated time, as an SVG drawn by hand.

Why by hand: two panels of bars and dots need no plotting library, the SVG is
text (diffable, deterministic for a seed) and opens in any browser. A ``.png``
path is rendered with matplotlib when it is installed (``pip install
'kafkron[plot]'``); it is optional so the simulation itself needs nothing more.

Above the panels, a lane of marks: each node killed (a cross, with a faint line
through the panels), restarted (a triangle) or frozen (a bar); schedulers in the
upper half, workers in the lower. Grey bands: the broker did not answer.
Top panel: the peak fires (first attempts) per second within each column, blue
(a midnight of 20,000 jobs is a spike; with spread it is a plateau), and the peak
retries per second, orange (in lockstep without jitter, spread out with it).
Middle panel: each first attempt's lateness (broker append minus scheduled
instant), log scale, at its scheduled time, with its p50 and p99 per column.
Bottom band: one row per shard, coloured by the scheduler serving it (white
while nobody does: a takeover). The faulty (safety) phase is shaded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from simulation.run import Outcome
from topics.timefmt import format_ms

WIDTH, HEIGHT = 960, 680
LEFT, RIGHT = 110, 20  # wide enough for "1,000 s" and "shard 127" at 12 px
PANEL_H = 180
MARKS_TOP, MARKS_H = 34, 24  # the lane of node marks, above the first panel
TOP1 = MARKS_TOP + MARKS_H + 6
TOP2 = TOP1 + PANEL_H + 34
TOP3 = TOP2 + PANEL_H + 34
BAND_H = 128
COLUMNS = 480
DOTS_MAX = 6000
CRASH, PAUSE, RESTART, OUTAGE = "#9b2c2c", "#b7791f", "#276749", "#a0aec0"
P50, P99 = "#2c5282", "#742a2a"


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


def percentiles(outcome: Outcome) -> list[tuple[int, int, int]]:
    """(column, p50, p99) of first attempts' lateness, by scheduled instant, per column."""
    sc = outcome.scenario
    span_ms = sc.end_ms - sc.start_ms
    by_column: dict[int, list[int]] = {}
    for r in outcome.evidence.runs:
        if r.attempt == 1:
            column = min(COLUMNS - 1, max(0, (r.scheduled_ms - sc.start_ms) * COLUMNS // span_ms))
            by_column.setdefault(column, []).append(r.append_ms - r.scheduled_ms)
    out = []
    for column, lates in sorted(by_column.items()):
        lates.sort()
        n = len(lates)
        out.append((column, lates[min(n - 1, n * 50 // 100)], lates[min(n - 1, n * 99 // 100)]))
    return out


def marks(outcome: Outcome) -> list[tuple[int, str, str]]:
    """(true_ms, what, who): every crash, pause and restart of a node, and broker outages.

    ``what`` is crash, pause, resume, restart (a start after the first) or
    outage/back for the broker.
    """
    started: set[str] = set()
    out = []
    for e in outcome.world.timeline.events:
        if e.who in outcome.world.nodes:
            if e.kind == "start":
                if e.who in started:
                    out.append((e.true_ms, "restart", e.who))
                started.add(e.who)
            elif e.kind in ("crash", "pause", "resume"):
                out.append((e.true_ms, e.kind, e.who))
        elif e.who == "broker" and e.kind == "broker":
            out.append((e.true_ms, "outage" if "stops" in e.text else "back", "broker"))
    return out


def _lateness_label(ms: int) -> str:
    return f"{ms:,} ms" if ms < 1000 else f"{ms // 1000:,} s"


def svg(outcome: Outcome) -> str:
    sc = outcome.scenario
    span_ms = sc.end_ms - sc.start_ms
    plot_w = WIDTH - LEFT - RIGHT
    bottom = TOP3 + BAND_H
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
    for top, height in ((TOP1, PANEL_H), (TOP2, PANEL_H)):
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{heal_x - LEFT:.1f}" height="{height}" '
            'fill="#fde8e8"/>'
        )
    out.extend(_outages(outcome, x_of, bottom))
    for top, height in ((TOP1, PANEL_H), (TOP2, PANEL_H), (TOP3, BAND_H)):
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{height}" '
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
        label = _lateness_label(10**d) if d else "0 ms"
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
    # p50 and p99 as a tick per column (no line joins two distant columns).
    for column, p50, p99 in percentiles(outcome):
        x = LEFT + column * bar_w
        for late_ms, colour in ((p50, P50), (p99, P99)):
            y = y_of(late_ms)
            out.append(
                f'<line x1="{x:.1f}" x2="{x + max(bar_w, 3):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
    out.extend(_owners(outcome, x_of))
    out.extend(_marks(outcome, x_of, bottom))
    for i in range(5):
        instant = sc.start_ms + span_ms * i // 4
        x = x_of(instant)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="{anchor}">'
            f"{format_ms(instant)[11:19]}</text>"
        )
    out.append(
        f'<text x="{LEFT}" y="{TOP2 - 8}">lateness of each first attempt '
        f'(log scale; red: early), by scheduled instant; <tspan fill="{P50}">p50</tspan> and '
        f'<tspan fill="{P99}">p99</tspan> per column</text>'
    )
    out.append(
        f'<text x="{LEFT}" y="{TOP3 - 8}">who serves each shard (a colour per scheduler; '
        "white: nobody; black tick: a sampled shard)</text>"
    )
    out.append(
        f'<text x="{LEFT}" y="{HEIGHT - 8}">'
        f'<tspan fill="{CRASH}">&#x2715; killed</tspan>   '
        f'<tspan fill="{RESTART}">&#x25B2; restarted</tspan>   '
        f'<tspan fill="{PAUSE}">&#x25AE; paused</tspan>   '
        f'<tspan fill="{OUTAGE}">&#x2588; broker not answering</tspan></text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _outages(outcome: Outcome, x_of: Callable[[int], float], bottom: int) -> list[str]:
    """Grey bands across every panel while the broker did not answer."""
    out = []
    down_ms: int | None = None
    for at_ms, what, _ in marks(outcome):
        if what == "outage":
            down_ms = at_ms
        elif what == "back" and down_ms is not None:
            x0, x1 = x_of(down_ms), x_of(at_ms)
            out.append(
                f'<rect x="{x0:.1f}" y="{MARKS_TOP}" width="{max(x1 - x0, 1.5):.1f}" '
                f'height="{bottom - MARKS_TOP}" fill="{OUTAGE}" fill-opacity="0.45"/>'
            )
            down_ms = None
    return out


def _marks(outcome: Outcome, x_of: Callable[[int], float], bottom: int) -> list[str]:
    """A symbol per node event in the lane above the panels, and a faint line through them.

    Schedulers' marks sit in the lane's upper half, workers' in its lower half.
    """
    roles = {name: node.role for name, node in outcome.world.nodes.items()}
    out = [f'<text x="{LEFT - 6}" y="{MARKS_TOP + 16}" text-anchor="end">nodes</text>']
    for at_ms, what, who in marks(outcome):
        if who == "broker" or what == "resume":
            continue
        x = x_of(at_ms)
        y = MARKS_TOP + (7 if roles.get(who) == "scheduler" else 18)
        if what == "crash":
            out.append(
                f'<path d="M{x - 3:.1f},{y - 3} L{x + 3:.1f},{y + 3} M{x - 3:.1f},{y + 3} '
                f'L{x + 3:.1f},{y - 3}" stroke="{CRASH}" stroke-width="1.5"/>'
            )
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP1}" y2="{bottom}" '
                f'stroke="{CRASH}" stroke-opacity="0.18"/>'
            )
        elif what == "restart":
            out.append(
                f'<polygon points="{x:.1f},{y - 4} {x - 3.5:.1f},{y + 3} {x + 3.5:.1f},{y + 3}" '
                f'fill="{RESTART}"/>'
            )
        elif what == "pause":
            out.append(f'<rect x="{x - 1.5:.1f}" y="{y - 4}" width="3" height="8" fill="{PAUSE}"/>')
    return out


def _owners(outcome: Outcome, x_of: Callable[[int], float]) -> list[str]:
    """The band: one row per shard, coloured by the scheduler serving it."""
    sc = outcome.scenario
    shards = sc.shards
    row_h = BAND_H / shards
    schedulers = sorted(n for n, node in outcome.world.nodes.items() if node.role == "scheduler")
    # Hues by the golden angle from blue: neighbours in name order look different.
    hue = {name: (210 + i * 137.508) % 360 for i, name in enumerate(schedulers)}
    out = []
    for interval in outcome.world.ownership.intervals:
        x0 = x_of(interval.start_ms)
        x1 = x_of(sc.end_ms if interval.end_ms is None else interval.end_ms)
        y = TOP3 + interval.shard * row_h
        out.append(
            f'<rect x="{x0:.1f}" y="{y:.2f}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{row_h:.2f}" fill="hsl({hue.get(interval.node, 0):.0f},55%,55%)"/>'
        )
    if sc.sample is not None:
        for p in sc.sample.shards:
            y = TOP3 + p * row_h
            out.append(
                f'<rect x="{LEFT - 5}" y="{y:.2f}" width="4" height="{max(row_h, 1):.2f}" '
                'fill="black"/>'
            )
    out.append(f'<text x="{LEFT - 8}" y="{TOP3 + 10}" text-anchor="end">shard 0</text>')
    out.append(
        f'<text x="{LEFT - 8}" y="{TOP3 + BAND_H}" text-anchor="end">shard {shards - 1}</text>'
    )
    return out


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
        for at_ms, what, _ in marks(outcome):  # as the SVG's lane: kills and restarts
            if what in ("crash", "restart"):
                axis.axvline(
                    (at_ms - sc.start_ms) / 60_000,
                    color=CRASH if what == "crash" else RESTART,
                    alpha=0.3,
                    zorder=1,
                )
    fig.suptitle(f"{sc.name}, seed {outcome.seed}")
    fig.savefig(path, dpi=100)
    plt.close(fig)
