"""First fire after ``kill -9`` of a shard's owner: cold restore against a warm standby.

Two takeovers of a 100k-schedule shard in one run, each on a fresh namespace:

- ``cold``: two ``kafkron scheduler`` processes without standbys; the owner is
  killed with SIGKILL and the survivor fences, restores the whole shard, fires
  (the baseline);
- ``warm``: the same with ``--standbys 1``: the survivor kept shard 0 warm by
  tailing its changelog, so it fences, catches up and fires.

The figure is the time from the SIGKILL to the first run the survivor fired being
visible to a read_committed consumer, against the target: the session timeout
plus 1 s (the group cannot move the shard before the session expires).

    python bench/takeover.py [--schedules 100000] [--session-timeout-ms 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

from e2e_fire import (  # the loading, watching and process helpers
    Scheduler,
    Watch,
    changelog_records,
    new_namespace,
    now_ms,
    produce_changelog,
    watch_runs,
)

from topics.admin import delete_topics

PERIOD_S = 60  # each schedule fires once a minute: a steady ~1.7k runs/s for 100k


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class CouldNotMeasure(Exception):
    pass


async def until(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.2)
    raise CouldNotMeasure(f"{what} took over {timeout_s:.0f} s")


async def takeover(args: argparse.Namespace, logs: Path, standbys: int) -> dict[str, object]:
    """One takeover; returns its figures (seconds from SIGKILL to the first new fire)."""
    name = "warm" if standbys else "cold"
    settings = await new_namespace(args.bootstrap)
    watch, stop = Watch(), asyncio.Event()
    watcher: asyncio.Task[None] | None = None
    processes: list[Scheduler] = []
    try:
        lead_ms = 20_000
        records = changelog_records(args.schedules, 1000, PERIOD_S, now_ms() + lead_ms)
        await asyncio.wait_for(produce_changelog(settings, records), args.phase_timeout_s)
        progress(f"{name}: {len(records):,} changelog records written")
        watcher = asyncio.create_task(watch_runs(settings, watch, stop))
        extra = ("--standbys", str(standbys))
        timeout_ms = args.session_timeout_ms
        first = Scheduler(settings, logs / f"{name}-a.log", timeout_ms, extra)
        processes.append(first)
        await until(first.owns_shard_0, args.phase_timeout_s, f"{name}: the first owner")
        await until(
            lambda: first.restore_ms() is not None, args.phase_timeout_s, f"{name}: its restore"
        )
        second = Scheduler(settings, logs / f"{name}-b.log", timeout_ms, extra)
        processes.append(second)
        started_ms = now_ms()
        # Wait until fires flow after the rebalance the second process caused, and (warm)
        # until whichever process does not own shard 0 has its standby caught up.
        await until(
            lambda: any(v > started_ms + 2 * timeout_ms for v, _, _ in watch.seen[-100:]),
            args.phase_timeout_s,
            f"{name}: fires after the second process joined",
        )

        def settled() -> bool:
            owners = [p for p in processes if p.owns_shard_0()]
            if len(owners) != 1:
                return False
            other = next(p for p in processes if p is not owners[0])
            return not standbys or "standby of shard 0 caught up" in other.text()

        await until(settled, args.phase_timeout_s, f"{name}: one owner and a caught-up standby")
        victim = next(p for p in processes if p.owns_shard_0())
        survivor = next(p for p in processes if p is not victim)
        await asyncio.sleep(2)
        killed_ms = now_ms()
        victim.proc.send_signal(signal.SIGKILL)
        progress(f"{name}: owner killed; waiting for the survivor's first fire")
        await until(
            lambda: any(f > killed_ms for _, _, f in watch.seen[-5000:]),
            args.session_timeout_ms / 1000 + args.phase_timeout_s,
            f"{name}: a run fired by the new owner",
        )
        visible = min(v for v, _, f in watch.seen if f > killed_ms)
        text = survivor.text()
        how = "catch-up" if "taken over from its standby" in text else "restore"
        built = re.findall(r"(?:restored|caught up) in (\d+) ms", text)
        figures: dict[str, object] = {
            "first_fire_s": round((visible - killed_ms) / 1000, 2),
            "how": how,
            "build_ms": int(built[-1]) if built else None,
        }
        progress(f"{name}: {figures}")
        return figures
    finally:
        stop.set()
        if watcher is not None:
            await watcher
        for process in processes:
            process.stop(signal.SIGKILL)
        await delete_topics(settings)


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="takeover-") as tmp:
        results = {}
        for standbys in (0, 1):
            name = "warm" if standbys else "cold"
            progress(f"phase {name} ...")
            try:
                results[name] = await asyncio.wait_for(
                    takeover(args, Path(tmp), standbys), 4 * args.phase_timeout_s
                )
            except (CouldNotMeasure, TimeoutError) as error:
                print(f"bench takeover: could not measure ({name}: {error or 'timed out'})")
                return 1
    cold, warm = results["cold"], results["warm"]
    budget_s = args.session_timeout_ms / 1000 + 1
    warm_s, cold_s = float(warm["first_fire_s"]), float(cold["first_fire_s"])  # type: ignore[arg-type]
    print(
        f"first fire after kill -9 with {args.schedules:,} schedules: warm standby {warm_s:.2f} s"
        f" ({warm['how']}, built in {warm['build_ms']} ms) against cold {cold_s:.2f} s"
        f" ({cold['how']}, built in {cold['build_ms']} ms); target {budget_s:.1f} s"
    )
    print(
        f"bench takeover: schedules={args.schedules} session_timeout_ms={args.session_timeout_ms}"
        f" warm_first_fire_s={warm_s:.2f} cold_first_fire_s={cold_s:.2f}"
        f" warm_vs_cold={warm_s / cold_s:.2f} warm_how={warm['how']}"
        f" target_s={budget_s:.1f} target_met={warm_s <= budget_s}"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--phase-timeout-s", type=float, default=180.0)
    parser.add_argument("--bootstrap", default=None)
    parsed = parser.parse_args()
    if parsed.schedules < 1_000:
        parser.error("--schedules must be at least 1000 (1,000 anchors)")
    sys.exit(asyncio.run(main(parsed)))
