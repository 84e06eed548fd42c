"""Rate limits hold: the runs of a rate-limit key started within any 1 s number at most
``per_s + burst`` (docs/DESIGN.md §8.5, the bound `actors/worker/ratelimit.py` proves),
by the jobs' own start log, in true time, across every worker and every failover.

A window is closed, ``[s, s + 1000 ms]``; the busiest one begins at a start, so each
start is taken as a window's first. A key named with several rates is judged by the
largest ``per_s`` and ``burst`` it was named with (schedules of one key should agree).
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms

WINDOW_MS = 1000


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("rate-limits", "never more than per_s + burst starts of a key within 1 s")
    starts: dict[str, list[int]] = {}
    bound: dict[str, tuple[float, int]] = {}
    for e in evidence.executions:
        if e.rate_key is None:
            continue
        starts.setdefault(e.rate_key, []).append(e.start_ms)
        per_s, burst = bound.get(e.rate_key, (0.0, 0))
        bound[e.rate_key] = (max(per_s, e.per_s), max(burst, e.burst))
    for key, times in sorted(starts.items()):
        times.sort()
        per_s, burst = bound[key]
        most = per_s + burst
        last = 0
        for first in range(len(times)):
            verdict.checked += 1
            while last + 1 < len(times) and times[last + 1] <= times[first] + WINDOW_MS:
                last += 1
            count = last - first + 1
            if count > most:
                verdict.fail(
                    f"key {key!r} ({per_s:g}/s, burst {burst}): {count} starts within 1 s"
                    f" from {format_ms(times[first])}, more than {most:g}"
                )
                break  # one finding per key: the first window says it
    return verdict
