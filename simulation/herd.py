"""The herd's report: fires per second, lateness per zone, takeovers, drain time.

For a scenario with a ``[herd]`` table. The herd is every first attempt whose
scheduled instant is in ``[at, at + window)``; its zone is the time zone of the
schedule group it belongs to (schedule ids are ``{prefix}{i}``). Lateness is the
broker's append instant minus the scheduled instant, as everywhere in the checkers.

In a sampled run (`simulation.scenario.Sample`) every count is what the sampled
shards did; fires per second are also given scaled to the whole fleet (divided by
the sampled fraction), marked as such. Takeover times are measured on every shard,
dark ones included (they go through the same lifecycle; the simulated restore
takes no time, so the gap is the group's and the lifecycle's share of a takeover,
not the restore's: `kafkron plan` adds that from measured restore rates).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from simulation.checkers.evidence import Evidence
from simulation.ownership import Ownership
from simulation.scenario import Scenario
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


@dataclass(frozen=True, slots=True)
class ZoneLateness:
    zone: str
    runs: int
    p50_ms: int
    p99_ms: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class HerdReport:
    herd_runs: int
    fires_per_s_peak: int  # first attempts appended in one second, sampled shards
    fires_per_s_peak_fleet: int  # the same divided by the sampled fraction
    peak_second: str
    zones: list[ZoneLateness]
    fired_all_s: float | None  # from the herd instant to its last first attempt
    drained_99_s: float | None  # to the result that ended 99% of the herd's runs
    drained_s: float | None  # to the result that ended the herd's last run
    takeovers: int
    takeover_p50_ms: int | None
    takeover_p99_ms: int | None
    takeover_max_ms: int | None
    per_second: list[tuple[int, int]]  # (second since the herd, first attempts appended)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: getattr(self, k) for k in self.__slots__ if k not in ("zones", "per_second")
        }
        out["zones"] = [
            {
                "zone": z.zone,
                "runs": z.runs,
                "p50_ms": z.p50_ms,
                "p99_ms": z.p99_ms,
                "max_ms": z.max_ms,
            }
            for z in self.zones
        ]
        return out

    def lines(self, fraction: float) -> list[str]:
        scaled = (
            ""
            if fraction == 1
            else f" (x{1 / fraction:g} for the whole fleet: {self.fires_per_s_peak_fleet:,}/s)"
        )
        out = [
            f"  herd runs                {self.herd_runs:,}",
            f"  fires/s at the peak      {self.fires_per_s_peak:,} at {self.peak_second}{scaled}",
            f"  all fired after          {_s(self.fired_all_s)}",
            f"  99% ended after          {_s(self.drained_99_s)}",
            f"  all ended after          {_s(self.drained_s)}",
            f"  shard takeovers          {self.takeovers:,}: unserved p50 "
            f"{_ms(self.takeover_p50_ms)}, p99 {_ms(self.takeover_p99_ms)}, "
            f"max {_ms(self.takeover_max_ms)}",
            "  lateness of the herd per zone (ms): runs, p50, p99, max",
        ]
        out += [
            f"    {z.zone:<22} {z.runs:>8,} {z.p50_ms:>8,} {z.p99_ms:>8,} {z.max_ms:>8,}"
            for z in self.zones
        ]
        busiest = sorted(self.per_second, key=lambda sc: (-sc[1], sc[0]))[:1]
        if busiest:
            out.append("  first attempts per second since the herd instant (sampled shards):")
            row = [f"{n:,}" for _, n in self.per_second[:30]]
            out.append("    " + " ".join(row) + (" ..." if len(self.per_second) > 30 else ""))
        return out


def report(scenario: Scenario, evidence: Evidence, ownership: Ownership) -> HerdReport | None:
    herd = scenario.herd
    if herd is None:
        return None
    zone_of = _zones(scenario)
    at_ms, end_ms = herd.at_ms, herd.at_ms + herd.window_ms
    first = [r for r in evidence.runs if r.attempt == 1 and at_ms <= r.scheduled_ms < end_ms]
    herd_ids = {r.run_id for r in first}
    by_zone: dict[str, list[int]] = {}
    for r in first:
        zone = zone_of.get(r.schedule_id.rstrip("0123456789"), "?")
        by_zone.setdefault(zone, []).append(r.append_ms - r.scheduled_ms)
    zones = []
    for zone, lates in sorted(by_zone.items()):
        lates.sort()
        zones.append(ZoneLateness(zone, len(lates), _pct(lates, 50), _pct(lates, 99), lates[-1]))
    seconds = Counter((r.append_ms - at_ms) // 1000 for r in first)
    per_second = [(s, seconds.get(s, 0)) for s in range(0, (max(seconds) + 1) if seconds else 0)]
    peak_s, peak = max(seconds.items(), key=lambda kv: (kv[1], -kv[0])) if seconds else (0, 0)
    fraction = scenario.sample.fraction if scenario.sample is not None else 1.0
    ended: dict[str, int] = {}
    for res in evidence.results:
        if res.run_id in herd_ids and res.status in (
            RunStatus.SUCCEEDED,
            RunStatus.CANCELLED,
            RunStatus.FAILED,
        ):
            ended[res.run_id] = max(ended.get(res.run_id, 0), res.append_ms)
    for run_id, _, append_ms in evidence.dead:
        if run_id in herd_ids:
            ended[run_id] = max(ended.get(run_id, 0), append_ms)
    # A run ends with its last result (a failed attempt is followed by a retry).
    done = sorted(ended.values())
    gaps = ownership.takeovers(scenario.start_ms, scenario.heal_ms)
    unserved = sorted(back - lost for _, lost, back in gaps)
    return HerdReport(
        herd_runs=len(first),
        fires_per_s_peak=peak,
        fires_per_s_peak_fleet=round(peak / fraction),
        peak_second=format_ms(at_ms + peak_s * 1000)[11:19],
        zones=zones,
        fired_all_s=(max(r.append_ms for r in first) - at_ms) / 1000 if first else None,
        drained_99_s=(done[int(0.99 * (len(done) - 1))] - at_ms) / 1000 if done else None,
        drained_s=(done[-1] - at_ms) / 1000 if len(done) == len(herd_ids) and done else None,
        takeovers=len(gaps),
        takeover_p50_ms=_pct(unserved, 50) if unserved else None,
        takeover_p99_ms=_pct(unserved, 99) if unserved else None,
        takeover_max_ms=unserved[-1] if unserved else None,
        per_second=per_second,
    )


def _zones(scenario: Scenario) -> dict[str, str]:
    """Schedule id prefix -> the time zone of its group's spec."""
    out = {}
    for group in scenario.schedules:
        prefix = group.id.split("{")[0] if group.count > 1 else group.id.rstrip("0123456789")
        spec = group.command.get("spec", {})
        out[prefix] = str(spec.get("tz", "UTC")) if isinstance(spec, dict) else "UTC"
    return out


def _pct(values: list[int], pct: int) -> int:
    return values[min(len(values) - 1, len(values) * pct // 100)]


def _s(value: float | None) -> str:
    return "not within the run" if value is None else f"{value:,.1f} s"


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value:,} ms"
