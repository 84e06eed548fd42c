"""Run one seed of a scenario and tell what happened: the story, the figures, the verdicts.

`simulate` is what the CLI, the tests and the benchmark call. Everything in
`Outcome.text()` and `Outcome.as_json()` is a function of (scenario, seed, broken
variants) alone, so the same seed prints the same bytes; wall-clock figures are
kept apart (`Outcome.wall_s`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from simulation.checkers import CHECKERS, Verdict
from simulation.checkers.evidence import Evidence, gather
from simulation.herd import HerdReport
from simulation.herd import report as herd_report
from simulation.scenario import Scenario
from simulation.world import World
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


@dataclass(slots=True)
class Outcome:
    scenario: Scenario
    seed: int
    broken: tuple[str, ...]
    world: World
    evidence: Evidence
    verdicts: list[Verdict]
    wall_s: float
    _herd: HerdReport | None = None

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    def replay(self) -> str:
        """The exact command that replays this run."""
        extra = "".join(f" --break {b}" for b in self.broken)
        if self.scenario.shrink > 1:
            extra += f" --shrink {self.scenario.shrink}"
        return f"kafkron simulate {self.scenario.path} --seed {self.seed}{extra}"

    def figures(self) -> dict[str, Any]:
        ev = self.evidence
        first = [r for r in ev.runs if r.attempt == 1]
        lateness = sorted(r.append_ms - r.scheduled_ms for r in first)
        kafka = self.world.kafka
        counts = self.world.timeline.counts()
        return {
            "simulated_s": (self.scenario.end_ms - self.scenario.start_ms) / 1000,
            "events": self.world.events_run,
            "fires": len(first),
            "attempts_retried": sum(1 for r in ev.runs if r.attempt > 1),
            "missed_reported": sum(1 for r in ev.results if r.status == RunStatus.MISSED),
            "skipped_reported": sum(1 for r in ev.results if r.status == RunStatus.SKIPPED),
            "dead_lettered": len(ev.dead),
            "lateness_ms_p50": _pct(lateness, 50),
            "lateness_ms_p99": _pct(lateness, 99),
            "lateness_ms_max": lateness[-1] if lateness else None,
            "early_within_skew_bound": sum(1 for late in lateness if late < 0),
            "faults_drawn": self.world.faults.drawn,
            "fenced": counts.get("fenced", 0),
            "transactions_committed": kafka.committed_total,
            "transactions_aborted": kafka.aborted_total,
            "effects_called_twice": sum(1 for n in ev.ledger_calls.values() if n > 1),
        }

    def herd(self) -> HerdReport | None:
        """The herd's report (scenarios with a ``[herd]`` table), computed once."""
        if self._herd is None:
            self._herd = herd_report(self.scenario, self.evidence, self.world.ownership)
        return self._herd

    def as_json(self) -> dict[str, Any]:
        self.herd()
        return {
            "v": 1,
            "scenario": self.scenario.name,
            "seed": self.seed,
            "broken": list(self.broken),
            "ok": self.ok,
            "replay": self.replay(),
            "figures": self.figures(),
            "sample": None
            if self.scenario.sample is None
            else {"shards": list(self.scenario.sample.shards), "of": self.scenario.sample.total},
            "verdicts": [
                {
                    "name": v.name,
                    "rule": v.rule,
                    "ok": v.ok,
                    "checked": v.checked,
                    "violations": v.violations[:20],
                    "violations_total": len(v.violations),
                }
                for v in self.verdicts
            ],
            "herd": None if self._herd is None else self._herd.as_json(),
            "timeline": [e.as_json() for e in self.world.timeline.events],
        }

    def text(self) -> str:
        sc = self.scenario
        lines = [
            f"scenario {sc.name}, seed {self.seed}"
            + (f" (broken on purpose: {', '.join(self.broken)})" if self.broken else "")
        ]
        lines += [f"  {line}" for line in sc.story.strip().splitlines()]
        lines.append(
            f"  {format_ms(sc.start_ms)} .. {format_ms(sc.end_ms)}; faults until "
            f"{format_ms(sc.heal_ms)}, then healed"
        )
        lines.append("")
        lines.extend(self.world.timeline.render())
        lines.append("")
        lines.append("who owned which shard (taken on at)")
        lines.extend(self._ownership())
        lines.append("")
        lines.append("at the end")
        for node in self.world.nodes.values():
            held = node.held()
            what = "shards" if node.role == "scheduler" else "runs partitions"
            lines.append(f"  {node.name:<10} {node.state:<6} {what} {held}")
        lines.append("")
        lines.append("figures")
        for key, value in self.figures().items():
            lines.append(f"  {key:<24} {value}")
        herd = self.herd()
        if herd is not None:
            lines.append("")
            sample = sc.sample
            if sample is None:
                lines.append("the herd")
            else:
                lines.append(
                    f"the herd (sampled shards {list(sample.shards)} of {sample.total}; "
                    "counts are theirs)"
                )
            lines.extend(herd.lines(1.0 if sample is None else sample.fraction))
        lines.append("")
        lines.append("invariants")
        for v in self.verdicts:
            mark = "ok  " if v.ok else "FAIL"
            lines.append(f"  {mark} {v.name:<15} {v.rule} ({v.checked:,} checked)")
            for violation in v.violations[:10]:
                lines.append(f"         {violation}")
            if len(v.violations) > 10:
                lines.append(f"         ... and {len(v.violations) - 10} more")
        lines.append("")
        if self.ok:
            lines.append(f"verdict: every invariant held (seed {self.seed})")
        else:
            lines.append(f"verdict: VIOLATION with seed {self.seed}; replay it with:")
            lines.append(f"  {self.replay()}")
        return "\n".join(lines) + "\n"

    def _ownership(self) -> list[str]:
        owners: dict[int, list[str]] = {}
        for event in self.world.timeline.events:
            if event.kind == "build" and event.text.startswith("shard "):
                shard = int(event.text.split()[1])
                stamp = format_ms(event.true_ms)[11:23]
                owners.setdefault(shard, []).append(f"{event.who} {stamp}")
        return [f"  shard {p}: " + " -> ".join(owners[p]) for p in sorted(owners)]


def _pct(values: list[int], pct: int) -> int | None:
    if not values:
        return None
    return values[min(len(values) - 1, (len(values) * pct) // 100)]


def simulate(scenario: Scenario, seed: int, *, broken: Iterable[str] = ()) -> Outcome:
    broken = tuple(sorted(set(broken)))
    started = time.perf_counter()
    world = World(scenario, seed, broken=broken)
    world.run()
    evidence = gather(world)
    verdicts = [check(evidence) for check in CHECKERS]
    return Outcome(scenario, seed, broken, world, evidence, verdicts, time.perf_counter() - started)
