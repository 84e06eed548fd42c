"""The README's benchmark table, written from the figures the benchmarks recorded.

Each benchmark that records (``--record``, `measured.py`) leaves its figures in
``bench/measured.json`` with the instant, the machine's CPU count and the command
that measured them. This script writes one row per recorded benchmark between the
README's two markers, every figure with its target where the project sets one and
whether the figure meets it, so the table says what was last measured and never
what someone remembered::

    python bench/shard_core.py --record && python bench/table.py   # then commit both
    python bench/table.py --check      # exit 1 if the README's table is not up to date

``tests/meta/test_bench_table.py`` checks that the committed README's table is what
this script writes from the committed ``bench/measured.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
MEASURED = HERE / "measured.json"
START = "<!-- bench table: written by python bench/table.py from bench/measured.json -->"
END = "<!-- end of bench table -->"

# (benchmark, figure) -> (comparison, bound, unit): the project's targets (issue 37 and
# the rounds before it); a figure without one is shown as measured.
TARGETS: dict[tuple[str, str], tuple[str, float, str]] = {
    ("shard_core", "advance_due_per_s"): (">=", 200_000, "due/s"),
    ("shard_core", "restore_records_per_s"): (">=", 500_000, "records/s"),
    ("shard_core", "bytes_per_schedule"): ("<=", 250, "B"),
    ("e2e_work", "ratio_vs_apscheduler"): (">=", 1.0, "×"),
    ("e2e_fire", "restore_s"): ("<=", 2.0, "s"),
    ("midnight_e2e", "last_result_s"): ("<=", 60.0, "s"),
    ("midnight_e2e", "twice"): ("<=", 0, ""),
    ("midnight_e2e", "early"): ("<=", 0, ""),
    ("midnight_herd", "last_visible_s"): ("<=", 60.0, "s"),
}


def _number(value: float) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _figure(bench: str, key: str, value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return f"{key} {value}"
    text = f"{key} {_number(value)}"
    target = TARGETS.get((bench, key))
    if target is None:
        return text
    comparison, bound, unit = target
    met = value >= bound if comparison == ">=" else value <= bound
    sign = "≥" if comparison == ">=" else "≤"
    unit_text = f" {unit}" if unit else ""
    verdict = "met" if met else "missed"
    return f"{text} (target {sign} {_number(bound)}{unit_text}: {verdict})"


def render(measured: dict[str, Any]) -> str:
    """The table, markers included, for ``measured`` (the contents of measured.json)."""
    lines = [
        START,
        "| benchmark | figures (last recorded) | measured at | command |",
        "|---|---|---|---|",
    ]
    for bench in sorted(measured):
        entry = measured[bench]
        figures = entry.get("figures", {})
        cells = "; ".join(_figure(bench, key, figures[key]) for key in sorted(figures))
        when = (
            f"{entry.get('measured_at', '?')}, {entry.get('cpus', '?')} CPUs, "
            f"Python {entry.get('python', '?')}"
        )
        lines.append(f"| `{bench}.py` | {cells} | {when} | `{entry.get('command', '?')}` |")
    lines.append(END)
    return "\n".join(lines)


def rewrite(readme: str, table: str) -> str:
    """``readme`` with the text between the markers (markers included) replaced."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"bench table: the README has no {START!r} ... {END!r} section")
    return readme[:start] + table + readme[end + len(END) :]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measured", type=Path, default=MEASURED)
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    table = render(json.loads(args.measured.read_text()))
    before = args.readme.read_text()
    after = rewrite(before, table)
    if args.check:
        if after != before:
            print(
                f"bench table: {args.readme} is not what {args.measured} gives; run bench/table.py"
            )
            return 1
        print("bench table: up to date")
        return 0
    if after != before:
        args.readme.write_text(after)
        print(f"bench table: {args.readme} rewritten from {args.measured}")
    else:
        print("bench table: already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
