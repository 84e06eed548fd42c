"""Random faults: knobs in pairs (probability per tick, minimum duration), one seed.

Every ``tick_ms`` of the safety phase each fault kind gets one draw per eligible
target (per node for node faults, once for the broker) from the world's single
`random.Random`; a fault that starts draws its duration in [min, 3 * min] and, for
a clock skew, its size. Each drawn fault is logged with all its parameters, so the
timeline alone says what happened and the seed alone reproduces it. Every fault
ends by the end of the safety phase, when the world heals.
"""

from __future__ import annotations

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


NODE_KINDS = ("crash", "pause", "skew")
WORKER_KINDS = ("slow_job", "worker_crash_mid_job")


class FaultInjector:
    def __init__(self, host: FaultHost, scenario: Scenario) -> None:
        self.host = host
        self.scenario = scenario
        self.busy: set[str] = set()  # targets under a fault right now ("broker" too)
        self.drawn = 0

    def install(self) -> None:
        if self.scenario.faults:
            self.host.at(self.scenario.start_ms + self.scenario.fault_tick_ms, self._tick)

    def _tick(self) -> None:
        host, scenario = self.host, self.scenario
        now = host.now()
        if now >= scenario.heal_ms:
            return
        for kind in sorted(scenario.faults):
            knob = scenario.faults[kind]
            for target in self._eligible(kind):
                if host.draw_float() >= knob.p:
                    continue
                duration_ms = host.draw_int(knob.min_ms, 3 * knob.min_ms)
                end_ms = min(now + duration_ms, scenario.heal_ms)
                value = 0
                if kind == "skew":
                    value = host.draw_int(-scenario.skew_max_ms, scenario.skew_max_ms)
                self.drawn += 1
                self.busy.add(target)
                lasts_s = (end_ms - now) / 1000
                what = f"{kind} on {target} for {lasts_s:.3f} s (drawn {duration_ms} ms"
                what += f", clock step {value:+d} ms)" if kind == "skew" else ")"
                host.log("fault", what)
                node = None if target == "broker" else target
                host.fault(kind, node, True, value)
                host.at(end_ms, self._ender(kind, target, value))
        host.at(now + scenario.fault_tick_ms, self._tick)

    def _ender(self, kind: str, target: str, value: int) -> Callable[[], None]:
        def end() -> None:
            if target in self.busy:
                self.busy.discard(target)
                self.host.fault(kind, None if target == "broker" else target, False, value)

        return end

    def _eligible(self, kind: str) -> list[str]:
        if kind == "broker":
            return [] if "broker" in self.busy else ["broker"]
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
