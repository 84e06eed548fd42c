"""Random faults: knobs in pairs (probability per tick, minimum duration), one seed.

Each fault kind has a probability per tick (``tick_ms``) for each eligible target
(per node for node faults, once for the broker); every draw comes from the
world's single `random.Random` (see `FaultInjector._plan` for how ticks without
a fault are skipped in one draw). A fault that starts draws its duration in
[min, 3 * min] and, for a clock skew, its size. Each drawn fault is logged with
all its parameters, so the timeline alone says what happened and the seed alone
reproduces it. Every fault ends by the end of the safety phase, when the world heals.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from simulation.scenario import Scenario


class Target(Protocol):
    name: str
    role: str
    state: str


class FaultHost(Protocol):
    def at(self, true_ms: int, action: Callable[[], None]) -> None: ...
    def fault(self, kind: str, node: str | None, start: bool, value: int) -> None: ...
    def now(self) -> int: ...
    def draw_float(self) -> float: ...
    def draw_int(self, low: int, high: int) -> int: ...
    def targets(self) -> list[Target]: ...
    def log(self, kind: str, text: str) -> None: ...


REPLAN_TICKS = 60  # the longest quiet stretch drawn at once

NODE_KINDS = ("crash", "pause", "skew")
BROKER_KINDS = ("broker", "refuse", "runs_denied", "coordinator_busy", "results_refused")
"""Faults of the broker as a whole (one target each, named after the kind)."""
WORKER_KINDS = ("slow_job", "worker_crash_mid_job", "group_cut")


class FaultInjector:
    def __init__(self, host: FaultHost, scenario: Scenario) -> None:
        self.host = host
        self.scenario = scenario
        self.busy: set[str] = set()  # targets under a fault right now ("broker" too)
        self.drawn = 0

    def install(self) -> None:
        if self.scenario.faults:
            self._plan(self.scenario.start_ms)

    def _pairs(self) -> list[tuple[str, str, float]]:
        return [
            (kind, target, self.scenario.faults[kind].p)
            for kind in sorted(self.scenario.faults)
            for target in self._eligible(kind)
        ]

    def _plan(self, now: int) -> None:
        """Jump to the next tick at which some fault starts (geometric, one draw).

        Drawing each (kind, target) every tick would cost a draw per pair per tick
        (a million for a simulated day); the number of quiet ticks before the first
        one with a fault is geometric, so one draw gives it. At that tick one pair
        is picked in proportion to its probability: the same distribution as
        per-tick draws, to first order in the (small) probabilities.
        """
        scenario = self.scenario
        tick_ms = scenario.fault_tick_ms
        quiet = 1.0
        for _, _, p in self._pairs():
            quiet *= 1.0 - p
        if quiet >= 1.0 or quiet <= 0.0:  # nothing eligible now: look again next tick
            # (plan again then, not start one then: a single target busy under its own
            # fault would otherwise get the next one the moment this one ends)
            replan_ms = now + tick_ms
            if replan_ms < scenario.heal_ms:
                self.host.at(replan_ms, lambda: self._plan(replan_ms))
            return
        else:
            u = 1.0 - self.host.draw_float()  # in (0, 1]
            ticks = 1 + int(math.log(u) / math.log(quiet))
        if ticks > REPLAN_TICKS:
            # The eligible targets change (nodes start, die, heal): look again later.
            # Quiet ticks are memoryless, so stopping the count here changes nothing.
            replan_ms = now + REPLAN_TICKS * tick_ms
            if replan_ms < scenario.heal_ms:
                self.host.at(replan_ms, lambda: self._plan(replan_ms))
            return
        at_ms = now + ticks * tick_ms
        if at_ms < scenario.heal_ms:
            self.host.at(at_ms, self._tick)

    def _tick(self) -> None:
        host = self.host
        now = host.now()
        pairs = self._pairs()
        total = sum(p for _, _, p in pairs)
        if total > 0:
            pick = host.draw_float() * total
            for kind, target, p in pairs:
                pick -= p
                if pick < 0:
                    self._start(kind, target, now)
                    break
        self._plan(now)

    def _start(self, kind: str, target: str, now: int) -> None:
        host, scenario = self.host, self.scenario
        knob = scenario.faults[kind]
        duration_ms = host.draw_int(knob.min_ms, 3 * knob.min_ms)
        end_ms = min(now + duration_ms, scenario.heal_ms)
        value = 0
        if kind == "skew":
            value = host.draw_int(-scenario.skew_max_ms, scenario.skew_max_ms)
        self.drawn += 1
        self.busy.add(target)
        lasts_s = (end_ms - now) / 1000
        on = {
            "broker": "broker unavailable",
            "refuse": "broker refuses every batch to runs",
            "runs_denied": "the schedulers' Write ACL on runs revoked",
            "coordinator_busy": "coordinators loading (InitProducerId, OffsetFetch)",
            "results_refused": "result batches refused",
        }.get(kind, f"{kind} on {target}")
        what = f"{on} for {lasts_s:.3f} s (drawn {duration_ms} ms"
        what += f", clock step {value:+d} ms)" if kind == "skew" else ")"
        host.log("fault", what)
        host.fault(kind, None if target in BROKER_KINDS else target, True, value)
        host.at(end_ms, self._ender(kind, target, value))

    def _ender(self, kind: str, target: str, value: int) -> Callable[[], None]:
        def end() -> None:
            if target in self.busy:
                self.busy.discard(target)
                self.host.fault(kind, None if target in BROKER_KINDS else target, False, value)

        return end

    def _eligible(self, kind: str) -> list[str]:
        if kind in BROKER_KINDS:
            return [] if kind in self.busy else [kind]
        out = []
        for node in self.host.targets():
            if node.name in self.busy or node.state != "up":
                continue
            if kind in WORKER_KINDS and node.role != "worker":
                continue
            if kind == "worker_crash_mid_job" and not getattr(node, "running", None):
                continue
            out.append(node.name)
        return out

    def heal_all(self) -> list[str]:
        """End every fault still on (the liveness phase starts); what was healed."""
        healed = sorted(self.busy)
        self.busy.clear()
        return healed
