"""Simulated hours per wall second: a day of the billing world under faults.

The world is `simulation/scenarios/billing-24h.toml`: 10,000 customer schedules
plus the billing jobs, two schedulers and two workers, 23 hours of random faults
(crashes, pauses, broker outages, clock steps, slow jobs, workers killed mid-job)
and one healed hour, checked by every invariant. Target: 24 simulated hours in at
most 30 s of wall time.

Baseline, measured in the same run: the same world driven by a fixed tick loop
(every node woken every ``--tick-ms``, as a naive simulator polling like the real
runtime would), over a short slice of the day; the ratio says what jumping from
one event to the next buys.

    .venv/bin/python bench/simulate.py [--seed 1] [--tick-ms 10] [--slice-s 120]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from simulation.run import simulate
from simulation.scenario import load
from simulation.world import World

SCENARIO = Path(__file__).resolve().parent.parent / "simulation" / "scenarios" / "billing-24h.toml"
TARGET_S = 30.0


class TickLoopWorld(World):
    """The baseline: besides its events, every node takes a turn every tick."""

    tick_ms = 10

    def run(self) -> None:
        self.at(self.scenario.start_ms + self.tick_ms, self._tick)
        super().run()

    def _tick(self) -> None:
        now = self.time.true_ms
        for node in self.nodes.values():
            node.wake(now)
        self.at(now + self.tick_ms, self._tick)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tick-ms", type=int, default=10, help="baseline tick (the wheel's)")
    parser.add_argument("--slice-s", type=int, default=120, help="baseline: simulated seconds")
    args = parser.parse_args()
    scenario = load(SCENARIO)

    cpu_started = time.process_time()
    outcome = simulate(scenario, args.seed)
    cpu_s = time.process_time() - cpu_started
    simulated_h = (scenario.end_ms - scenario.start_ms) / 3_600_000
    rate = simulated_h / outcome.wall_s
    figures = outcome.figures()
    print(
        f"event-driven: {simulated_h:.0f} simulated h in {outcome.wall_s:.1f} s "
        f"({rate:,.2f} simulated h per wall s; {cpu_s:.1f} s of CPU), "
        f"{figures['events']:,} events, "
        f"{figures['fires']:,} fires, {figures['faults_drawn']} faults, "
        f"invariants {'held' if outcome.ok else 'VIOLATED'}"
    )

    sliced = dataclasses.replace(scenario, safety_ms=args.slice_s * 1000, liveness_ms=0)
    TickLoopWorld.tick_ms = args.tick_ms
    baseline = TickLoopWorld(sliced, args.seed)
    started = time.perf_counter()
    baseline.run()
    baseline_s = time.perf_counter() - started
    baseline_rate = (args.slice_s / 3600) / baseline_s
    print(
        f"tick loop ({args.tick_ms} ms): {args.slice_s} simulated s in {baseline_s:.1f} s "
        f"({baseline_rate:,.4f} simulated h per wall s; a day would take "
        f"{24 / baseline_rate / 3600:,.1f} h)"
    )
    print(
        f"bench simulate: sim_h_per_wall_s={rate:.2f} wall_s_24h={outcome.wall_s:.1f} "
        f"cpu_s_24h={cpu_s:.1f} "
        f"target_s={TARGET_S:.0f} within_target={outcome.wall_s <= TARGET_S} "
        f"tick_loop_sim_h_per_wall_s={baseline_rate:.4f} ratio={rate / baseline_rate:.0f}x "
        f"events={figures['events']} fires={figures['fires']} ok={outcome.ok}"
    )


if __name__ == "__main__":
    main()
