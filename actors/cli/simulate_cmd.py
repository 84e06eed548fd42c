"""``kafkron simulate``: replay failures deterministically against the real state machines.

Runs a scenario (a bundled one by name, see ``--list``, or a TOML file) in simulated time:
the real shard and worker cores over a simulated Kafka, with the scenario's
scripted and random faults drawn from one seed, then a healed phase that must
converge. Prints the story (who owned which shard, what fired when, what was
fenced, what was retried) and a verdict per invariant. On a violation it prints
the seed and the exact command that replays it, and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from actors.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from topics.codec import dumps

EPILOG = """\
examples:
  kafkron simulate --list                      # the bundled scenarios, a line each
  kafkron simulate midnight-reboot --seed 7
  kafkron simulate leader-paused-15s --sweep 50
  kafkron simulate midnight-20k --seed 3 --plot night.svg
  kafkron simulate fx-rates-90s --seed 1 --json > run.json
  kafkron simulate internet-midnight --shrink 100 --plot herd.svg
  kafkron simulate my-night.toml --seed 1      # a scenario file of your own

SCENARIO is a path if such a file exists, else a bundled scenario's name.
--sweep K runs seeds SEED .. SEED+K-1 and prints one line per seed (no story).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="deterministic failover simulation of a scenario (seeded)",
        description="Run a failure scenario in simulated time against the real state "
        "machines; print the story and a verdict per invariant.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "scenario",
        metavar="SCENARIO",
        nargs="?",
        help="a bundled scenario's name (see --list) or a scenario TOML file",
    )
    parser.add_argument("--list", action="store_true", help="list the bundled scenarios")
    parser.add_argument("--seed", type=int, default=1, help="the seed (default 1)")
    parser.add_argument("--sweep", type=int, metavar="K", help="run K seeds from --seed on")
    parser.add_argument("--plot", metavar="FILE", help="write fires/s and lateness (.svg/.png)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the story")
    parser.add_argument(
        "--shrink",
        type=int,
        metavar="N",
        help="divide every schedule group's count by N (a quick look at a fleet-sized scenario)",
    )
    # Test-only: the deliberately broken variants the checkers must catch.
    parser.add_argument(
        "--break", dest="broken", action="append", default=[], help=argparse.SUPPRESS
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulation.catalog import bundled, listing, resolve
    from simulation.host import BROKEN_VARIANTS
    from simulation.run import simulate
    from simulation.scenario import ScenarioError, shrunk

    if args.list:
        sys.stdout.write(listing())
        return EXIT_OK
    if args.scenario is None:
        print(
            "kafkron simulate: name a scenario: a TOML file or one of "
            f"{', '.join(sorted(bundled()))} (--list describes them)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        scenario = resolve(args.scenario)
    except ScenarioError as error:
        print(f"kafkron simulate: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.shrink is not None:
        if args.shrink < 1:
            print("kafkron simulate: --shrink needs a divisor of at least 1", file=sys.stderr)
            return EXIT_USAGE
        scenario = shrunk(scenario, args.shrink)
    unknown = [b for b in args.broken if b not in BROKEN_VARIANTS]
    if unknown:
        print(f"kafkron simulate: --break {unknown[0]}: one of {BROKEN_VARIANTS}", file=sys.stderr)
        return EXIT_USAGE
    if args.sweep is not None:
        if args.sweep < 1:
            print("kafkron simulate: --sweep needs a count of at least 1", file=sys.stderr)
            return EXIT_USAGE
        return _sweep(scenario, args.seed, args.sweep, args.broken, args.json)
    outcome = simulate(scenario, args.seed, broken=args.broken)
    if args.plot:
        from simulation.plot import write

        try:
            write(outcome, args.plot)
        except ValueError as error:
            print(f"kafkron simulate: {error}", file=sys.stderr)
            return EXIT_USAGE
    if args.json:
        sys.stdout.buffer.write(dumps(outcome.as_json()) + b"\n")
    else:
        sys.stdout.write(outcome.text())
    hours = (scenario.end_ms - scenario.start_ms) / 3_600_000
    print(f"simulated {hours:.2f} h in {outcome.wall_s:.2f} s of wall time", file=sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_FAILURE


def _sweep(scenario: Any, first: int, count: int, broken: list[str], as_json: bool) -> int:
    from simulation.run import simulate

    failed: list[Any] = []
    started = time.perf_counter()
    for seed in range(first, first + count):
        outcome = simulate(scenario, seed, broken=broken)
        bad = [v.name for v in outcome.verdicts if not v.ok]
        if as_json:
            record = {
                "v": 1,
                "seed": seed,
                "ok": outcome.ok,
                "failed": bad,
                "replay": outcome.replay(),
            }
            sys.stdout.buffer.write(dumps(record) + b"\n")
        else:
            f = outcome.figures()
            print(
                f"seed {seed:>6}: {'ok  ' if outcome.ok else 'FAIL'} fires={f['fires']} "
                f"faults={f['faults_drawn']} fenced={f['fenced']}"
                + (f" violated={','.join(bad)}" if bad else "")
            )
        if not outcome.ok:
            failed.append(outcome)
    wall_s = time.perf_counter() - started
    print(
        f"{count - len(failed)}/{count} seeds held every invariant ({wall_s:.1f} s)",
        file=sys.stderr,
    )
    for outcome in failed:
        first_bad = next(v for v in outcome.verdicts if not v.ok)
        print(
            f"seed {outcome.seed} violates {first_bad.name}: {first_bad.violations[0]}",
            file=sys.stderr,
        )
        print(f"  replay: {outcome.replay()}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK
