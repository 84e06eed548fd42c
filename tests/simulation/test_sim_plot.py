"""The plot shows the run's series: the SVG's bars and dots are the evidence's records.

The SVG is written by hand, so these tests read it back as XML and compare each
series with what they count themselves from the evidence: blue bars are the peak
first attempts per second of each column, orange bars the peak retries, one dot
per first attempt at its scheduled instant, red when it reached runs before its
instant. A PNG needs the optional matplotlib (``kafkron[plot]``).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from simulation.checkers.evidence import RunRecord
from simulation.plot import COLUMNS, CRASH, LEFT, PANEL_H, RESTART, RIGHT, TOP1, WIDTH, svg
from simulation.run import Outcome, simulate
from simulation.scenario import load
from tests.kit.paths import REPO as ROOT
from topics.timefmt import parse_instant

SCENARIOS = ROOT / "simulation" / "scenarios"
NS = "{http://www.w3.org/2000/svg}"
FIRES, RETRIES, EARLY, ON_TIME = "#2b6cb0", "#dd6b20", "#c53030", "#2f855a"


def _run(name: str, seed: int) -> Outcome:
    return simulate(load(SCENARIOS / f"{name}.toml"), seed)


def _column_peaks(outcome: Outcome, runs: list[RunRecord]) -> dict[int, int]:
    """Column -> the most records appended within one second of that column."""
    sc = outcome.scenario
    span_ms = sc.end_ms - sc.start_ms
    peaks: dict[int, int] = {}
    for second, count in Counter(r.append_ms // 1000 for r in runs).items():
        column = min(COLUMNS - 1, max(0, (second * 1000 - sc.start_ms) * COLUMNS // span_ms))
        peaks[column] = max(peaks.get(column, 0), count)
    return peaks


def _bars(root: ET.Element, fill: str) -> set[tuple[str, str]]:
    return {
        (r.attrib["x"], r.attrib["height"])
        for r in root.iter(f"{NS}rect")
        if r.attrib.get("fill") == fill and "y" in r.attrib
    }


def _expected_bars(peaks: dict[int, int], peak: int) -> set[tuple[str, str]]:
    bar_w = (WIDTH - LEFT - RIGHT) / COLUMNS
    return {(f"{LEFT + i * bar_w:.1f}", f"{v * PANEL_H / peak:.1f}") for i, v in peaks.items()}


def test_svg_bars_are_the_peak_fires_and_retries_per_second() -> None:
    outcome = _run("email-blip-jitter", 1)
    runs = outcome.evidence.runs
    fires = _column_peaks(outcome, [r for r in runs if r.attempt == 1])
    retries = _column_peaks(outcome, [r for r in runs if r.attempt > 1])
    assert fires and retries  # the blip makes retries: both series are drawn
    peak = max([*fires.values(), *retries.values()])
    root = ET.fromstring(svg(outcome))
    assert _bars(root, FIRES) == _expected_bars(fires, peak)
    assert _bars(root, RETRIES) == _expected_bars(retries, peak)
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert f"{peak:,}/s" in texts and "retries" in texts
    assert texts[0] == "email-blip-jitter, seed 1: fires per second (peak per column) and lateness"
    # The tallest bar is the busiest second's, and it fills the panel exactly.
    tallest = max(float(h) for _, h in _bars(root, FIRES) | _bars(root, RETRIES))
    assert tallest == PANEL_H
    # Every bar stands on the panel's baseline.
    bars = [r for r in root.iter(f"{NS}rect") if r.attrib.get("fill") in (FIRES, RETRIES)]
    for bar in bars:
        bottom = float(bar.attrib["y"]) + float(bar.attrib["height"])
        assert abs(bottom - (TOP1 + PANEL_H)) <= 0.1


def test_svg_dots_are_the_first_attempts_red_when_early() -> None:
    # sched-b's clock runs 60 s fast: held back to within the skew bound, so some of
    # its first attempts reach runs a little before their instant (red dots).
    outcome = _run("clock-60s-fast", 1)
    sc = outcome.scenario
    first = [r for r in outcome.evidence.runs if r.attempt == 1]
    early = [r for r in first if r.append_ms < r.scheduled_ms]
    assert early and len(early) < len(first)
    root = ET.fromstring(svg(outcome))
    dots = list(root.iter(f"{NS}circle"))
    assert len(dots) == len(first)
    colours = Counter(d.attrib["fill"] for d in dots)
    assert colours == {EARLY: len(early), ON_TIME: len(first) - len(early)}
    plot_w = WIDTH - LEFT - RIGHT
    span_ms = sc.end_ms - sc.start_ms
    expected_x = Counter(
        f"{LEFT + (r.scheduled_ms - sc.start_ms) * plot_w / span_ms:.1f}" for r in first
    )
    assert Counter(d.attrib["cx"] for d in dots) == expected_x


def test_cli_plot_png_with_matplotlib_or_a_clear_error_without(tmp_path: Path) -> None:
    png = tmp_path / "night.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "simulate",
            "simulation/scenarios/midnight-reboot.toml",
            "--seed",
            "3",
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    if importlib.util.find_spec("matplotlib") is not None:  # the optional ``plot`` extra
        assert done.returncode == 0, done.stderr
        assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert done.returncode == 2
        assert "PNG needs matplotlib" in done.stderr and "or name a .svg file" in done.stderr


def test_svg_marks_the_reboot_and_bands_the_owners() -> None:
    # midnight-reboot: the only scheduler is killed at 23:58 and started at 00:03.
    outcome = _run("midnight-reboot", 7)
    sc = outcome.scenario
    root = ET.fromstring(svg(outcome))
    plot_w = WIDTH - LEFT - RIGHT
    span_ms = sc.end_ms - sc.start_ms

    def x_of(instant_ms: int) -> float:
        return LEFT + (instant_ms - sc.start_ms) * plot_w / span_ms

    crash_ms = parse_instant("2026-03-04T23:58:00Z")
    start_ms = parse_instant("2026-03-05T00:03:00Z")
    crosses = [p for p in root.iter(f"{NS}path") if p.attrib.get("stroke") == CRASH]
    assert len(crosses) == 1
    assert crosses[0].attrib["d"].startswith(f"M{x_of(crash_ms) - 3:.1f},")
    triangles = [p for p in root.iter(f"{NS}polygon") if p.attrib.get("fill") == RESTART]
    assert len(triangles) == 1
    assert triangles[0].attrib["points"].startswith(f"{x_of(start_ms):.1f},")
    # The band: one rect per interval in which sched-a served a shard; none of them
    # covers the reboot, when nobody served any shard.
    band = [r for r in root.iter(f"{NS}rect") if r.attrib.get("fill", "").startswith("hsl(")]
    intervals = outcome.world.ownership.intervals
    assert len(band) == len(intervals) and {i.node for i in intervals} == {"sched-a"}
    assert {i.shard for i in intervals} == set(range(sc.shards))
    for interval in intervals:
        end_ms = sc.end_ms if interval.end_ms is None else interval.end_ms
        assert end_ms <= crash_ms or interval.start_ms >= start_ms
    # Every axis label fits left of the panels (none is clipped at the image's edge):
    # at 12 px, a label takes at most 7 px per character.
    for text in root.iter(f"{NS}text"):
        if text.attrib.get("text-anchor") == "end" and float(text.attrib["x"]) <= LEFT:
            assert len(text.text or "") * 7 <= float(text.attrib["x"]), text.text
