"""A pause ``until`` T resumes by itself, once, not before T; nothing fires while paused
(docs/DESIGN.md §2.2, `actors/shard/pausing.py`).

Judged on the changelog's history (`checkers.pauses`) and ``{ns}.runs``, by the
broker's append instants: no first attempt of the schedule is appended between the
record showing it paused and the one showing it resumed; the resume is appended no
earlier than T (less the skew bound, as `never_early`); it happens if T is before the
end less the settle time; and once resumed, no record shows that pause again (a
second resume would need it). What came due while paused is then the misfire
policy's (fired late or reported missed after the resume): `nothing_missed` checks
that each is accounted for.
"""

from __future__ import annotations

from actors.scheduler.skew import DEFAULT_BOUND_MS
from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("pause-until", "a pause until T fires nothing, resumes once, not before T")
    horizon_ms = evidence.end_ms - evidence.settle_ms
    for w in evidence.pauses:
        verdict.checked += 1
        name = f"{w.schedule_id} paused at {w.at} until {format_ms(w.until_ms)}"
        if w.again_ms is not None:
            verdict.fail(f"{name}: paused again at {format_ms(w.again_ms)} after it ended")
        if w.ended is None and w.until_ms <= horizon_ms:
            verdict.fail(f"{name}: never resumed")
        if w.resumed_ms is not None and w.resumed_ms < w.until_ms - DEFAULT_BOUND_MS:
            verdict.fail(f"{name}: resumed early, at {format_ms(w.resumed_ms)}")
        end_ms = evidence.end_ms if w.ended_ms is None else w.ended_ms
        for run in evidence.runs:
            if (
                run.schedule_id == w.schedule_id
                and run.attempt == 1
                and w.paused_ms < run.append_ms < end_ms
            ):
                verdict.fail(f"{name}: {run.run_id} fired at {format_ms(run.append_ms)}")
    return verdict
