"""This checkout against a previous commit, in the same hour: the new/old ratio per figure.

A change must cost nothing where it is not used: ``e2e_fire``, ``e2e_work``,
``shard_core`` and ``worker_core`` with none of the new fields set should stay
within 3% of the previous main measured in the same hour (a benchmark newer than
that commit runs as this checkout's script against its code). This script checks the
previous commit out in a git worktree of its own (a temporary directory, removed at
the end), then runs each benchmark ``--rounds`` times on each side, alternating
which side goes first from round to round so a machine that grows busier or quieter
over the hour weighs on both alike. Each run's last line (``bench NAME: key=value
...``) is parsed; for every numeric figure both sides report, the ratio new/old of
each round and their median are printed (above 1 is more of that figure: better for
a rate, worse for a latency). The load average is printed before each run, and
``--max-load`` waits (at most ``--load-wait-s``) for it to fall below a bound first.

The same script measures a lever against the code without it: ``--old .`` runs
this checkout on both sides, with ``--new-args`` given to the new side only::

    python bench/compare.py main~3                       # the four benchmarks, 3 rounds
    python bench/compare.py main~3 --bench shard_core --rounds 5
    python bench/compare.py . --bench e2e_work --new-args 'e2e_work=--loop uvloop'
    python bench/compare.py main~3 --args 'shard_core=--schedules 200000'
    python bench/compare.py 8f193a3 --bench e2e_fire --this-scripts

``--this-scripts`` runs this checkout's benchmark scripts on both sides: they are
copied into the old side's worktree (over its own), so each drives that side's code
and starts that side's processes, and a figure added since that commit is measured
on both sides. A benchmark script the old commit does not have is always copied.

Every run is bounded by ``--timeout-s``; progress goes to stderr; the last line is
``bench compare: ...``, or says which benchmark could not be measured.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHES = ("e2e_fire", "e2e_work", "shard_core", "worker_core")
WITHIN = 0.03  # the bar: a capability unused costs at most 3%


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def parse_bench_line(name: str, stdout: str) -> dict[str, float] | None:
    """The numeric figures of the last ``bench NAME: key=value ...`` line, or None."""
    prefix = f"bench {name}: "
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        return None
    figures: dict[str, float] = {}
    for word in lines[-1][len(prefix) :].split():
        key, sep, value = word.partition("=")
        if not sep:
            continue
        try:
            figures[key] = float(value)
        except ValueError:
            continue  # a word (a loop's name, True/False): not a figure
    return figures


@dataclass
class Side:
    name: str  # "new" or "old"
    root: Path
    args: dict[str, list[str]] = field(default_factory=dict)
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def side_env(side: Side) -> dict[str, str]:
    """The environment that puts ``side``'s checkout first on the path (not the installed one)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(side.root / "bench"), str(side.root)])}


def check_imports(side: Side) -> None:
    """Fail before measuring if ``side``'s benchmarks would import another checkout's code."""
    done = subprocess.run(
        [sys.executable, "-c", "import actors, topics; print(actors.__file__, topics.__file__)"],
        cwd=side.root,
        env=side_env(side),
        capture_output=True,
        text=True,
        check=True,
    )
    for path in done.stdout.split():
        if not Path(path).resolve().is_relative_to(side.root.resolve()):
            print(f"bench compare: could not measure: {side.name} imports {path}")
            raise SystemExit(1)


def run_bench(side: Side, bench: str, timeout_s: float) -> dict[str, float] | None:
    """One run of ``bench`` on ``side``'s checkout, with that checkout's code first on
    the path; its figures, or None if it could not measure."""
    env = side_env(side)
    script = side.root / "bench" / f"{bench}.py"
    command = [sys.executable, str(script), *side.args.get(bench, [])]
    log(f"{side.name}: {' '.join(command[1:])}")
    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=side.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log(f"{side.name}: {bench} did not finish within {timeout_s:.0f} s")
        return None
    figures = parse_bench_line(bench, done.stdout)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    log(f"{side.name}: {bench} took {time.monotonic() - started:.0f} s: {last}")
    if done.returncode != 0 or figures is None:
        log(
            f"{side.name}: {bench} could not measure (exit {done.returncode}): {done.stderr[-600:]}"
        )
        return None
    return figures


def wait_for_quiet(max_load: float | None, wait_s: float) -> float:
    """The 1-minute load average, once below ``max_load`` or after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    load = os.getloadavg()[0]
    while max_load is not None and load >= max_load and time.monotonic() < deadline:
        time.sleep(5)
        load = os.getloadavg()[0]
    return load


def ratios(new: list[dict[str, float]], old: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per figure both report, the ratio new/old of each round that both measured."""
    out: dict[str, list[float]] = {}
    for n, o in zip(new, old, strict=False):
        for key, value in n.items():
            before = o.get(key)
            if before:  # absent or 0: no ratio
                out.setdefault(key, []).append(value / before)
    return out


def worktree_of(commit: str, into: Path) -> Path:
    """A detached worktree of ``commit`` (the repository of this checkout)."""
    path = into / "old"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit],
        check=True,
        capture_output=True,
        text=True,
    )
    return path


def copy_scripts(into: Path, benches: list[str], every: bool) -> None:
    """This checkout's benchmark scripts into another checkout's ``bench/``: all of
    them (``every``: its helpers too, as a script imports them from there), else only
    the benchmarks that checkout lacks. Copied, not run from here: a script starts the
    scheduler and workers from its own checkout (its ``REPO``), which must be that
    side's."""
    target = into / "bench"
    target.mkdir(exist_ok=True)
    names = [p.name for p in (REPO / "bench").glob("*.py")] if every else []
    names += [f"{b}.py" for b in benches if not (target / f"{b}.py").exists()]
    for name in sorted(set(names)):
        shutil.copyfile(REPO / "bench" / name, target / name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the previous commit (anything git takes), or . for this one")
    parser.add_argument("--bench", action="append", choices=BENCHES, help="default: all four")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--args", action="append", default=[], metavar="NAME=ARGS", help="to both sides' NAME"
    )
    parser.add_argument(
        "--new-args", action="append", default=[], metavar="NAME=ARGS", help="to the new side's"
    )
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="bound of each run")
    parser.add_argument("--max-load", type=float, default=None, help="wait for a load below it")
    parser.add_argument("--load-wait-s", type=float, default=600.0)
    parser.add_argument(
        "--this-scripts",
        action="store_true",
        help="this checkout's benchmark scripts on both sides (copied into the old one's)",
    )
    args = parser.parse_args(argv)
    if args.this_scripts and args.old == ".":
        parser.error("--this-scripts compares with another commit; . already runs these scripts")
    benches = args.bench or list(BENCHES)

    def split(pairs: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for pair in pairs:
            name, sep, rest = pair.partition("=")
            if not sep or name not in BENCHES:
                parser.error(f"{pair!r}: give NAME=ARGS with NAME one of {', '.join(BENCHES)}")
            out.setdefault(name, []).extend(shlex.split(rest))
        return out

    both, new_only = split(args.args), split(args.new_args)
    with tempfile.TemporaryDirectory(prefix="kafkron-compare-") as tmp:
        old_root = REPO if args.old == "." else None
        try:
            if old_root is None:
                log(f"checking out {args.old} in a worktree of its own ...")
                old_root = worktree_of(args.old, Path(tmp))
                copy_scripts(old_root, benches, args.this_scripts)
            described = subprocess.run(
                ["git", "-C", str(old_root), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            new = Side("new", REPO, {b: both.get(b, []) + new_only.get(b, []) for b in benches})
            old = Side("old", old_root, {b: list(both.get(b, [])) for b in benches})
            check_imports(new)
            check_imports(old)
            loads: list[float] = []
            for round_no in range(args.rounds):
                for bench in benches:
                    order = (new, old) if round_no % 2 == 0 else (old, new)
                    for side in order:
                        load = wait_for_quiet(args.max_load, args.load_wait_s)
                        loads.append(load)
                        log(f"round {round_no + 1}/{args.rounds}, load average {load:.2f}")
                        figures = run_bench(side, bench, args.timeout_s)
                        side.runs.setdefault(bench, []).append(figures or {})
        finally:
            if old_root is not None and old_root != REPO:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_root)],
                    check=False,
                    capture_output=True,
                )
    words = [f"old={described}", f"rounds={args.rounds}"]
    if args.this_scripts:
        words.append("scripts=this")
    words.append(f"load_max={max(loads):.2f}")
    missing = []
    for bench in benches:
        found = ratios(new.runs[bench], old.runs[bench])
        if not found:
            missing.append(bench)
            continue
        print(f"{bench} (new/old per round; median):")
        for key, values in sorted(found.items()):
            median = statistics.median(values)
            rounds_text = " ".join(f"{v:.3f}" for v in values)
            flag = "" if abs(median - 1) <= WITHIN else f"  (beyond {WITHIN:.0%})"
            print(f"  {key}: {rounds_text}; median {median:.3f}{flag}")
            words.append(f"{bench}.{key}={median:.3f}")
    if missing:
        print(
            f"bench compare: could not measure {', '.join(missing)} on both sides; "
            + " ".join(words)
        )
        return 1
    print(f"bench compare: {' '.join(words)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
