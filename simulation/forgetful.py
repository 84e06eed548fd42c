"""The ``restore-forgets-fired-count`` broken variant (test-only): a restore that loses
a schedule's count of runs against ``max_runs``; and ``restore-forgets-backfill``: a
restore that loses a backfill's runs in flight and rewinds its cursor to the start
of its span, as a backfill whose state were kept outside the changelog would.

The simulated scheduler hands every changelog record it restores (or tails as a
warm standby) through `as_restored`; with the variant on, ``fired_count`` is dropped
from it first, so the new owner counts from zero again and a ``max_runs`` schedule
that crosses a takeover starts more runs than it may. The `max-runs` checker must
catch it (the `backfill` checker the second: repeats and more than max_parallel).
The shard's own code is untouched: the break is in what it is fed.
"""

from __future__ import annotations

from collections.abc import Collection

from topics.codec import dumps, loads

VARIANT = "restore-forgets-fired-count"
# The same place, another loss: a restored definition whose any spec lost its
# exclude, so the new owner fires on the excluded days (checker `excluded-days`).
EXCLUSIONS_VARIANT = "restore-drops-exclusions"
BACKFILL_VARIANT = "restore-forgets-backfill"
# A restored definition whose any spec lost the names of its calendars (a new owner
# that fires before it knows them, as if they excluded nothing; `excluded-days`).
CALENDAR_NAMES_VARIANT = "restore-drops-calendar-names"
# A restore that re-arms the schedules naming a calendar from its own now, not from
# the edit's commit: an allowed instant between the two is lost (`nothing-missed`;
# the node tells the restoring core no timestamps, `SchedulerNode._tell_calendars`).
REARM_FROM_NOW_VARIANT = "restore-rearms-calendars-from-now"
# A restore that loses which deadline alerts a run's shard wrote (its watch's
# ``alerted`` and ``done``): the new owner alerts them again (checker `deadlines`).
ALERTS_VARIANT = "restore-forgets-alerts"


def as_restored(value: bytes | None, broken: Collection[str]) -> bytes | None:
    """``value`` as the shard should restore it: as written, unless a variant is on."""
    if value is None or not broken:
        return value
    if EXCLUSIONS_VARIANT in broken and b'"exclude"' in value:
        doc = loads(value)
        definition = doc.get("def")
        spec = definition.get("spec") if isinstance(definition, dict) else None
        if isinstance(spec, dict) and "any" in spec:
            spec.pop("exclude", None)
            value = dumps(doc)
    if CALENDAR_NAMES_VARIANT in broken and b'"exclude"' in value:
        doc = loads(value)
        definition = doc.get("def")
        spec = definition.get("spec") if isinstance(definition, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("exclude"), list):
            kept = [entry for entry in spec["exclude"] if not isinstance(entry, str)]
            if kept:
                spec["exclude"] = kept
            else:
                spec.pop("exclude")
            value = dumps(doc)
    if VARIANT in broken and b'"fired_count"' in value:
        doc = loads(value)
        doc.pop("fired_count", None)
        value = dumps(doc)
    if ALERTS_VARIANT in broken and b'"watch"' in value:
        doc = loads(value)
        for run in doc.get("runs") or ():
            watch = run.get("watch")
            if isinstance(watch, dict):
                watch.pop("alerted", None)
                watch.pop("done", None)
                watch.pop("started", None)
        value = dumps(doc)
    if BACKFILL_VARIANT in broken and b'"backfill"' in value:
        doc = loads(value)
        backfill = doc.get("backfill")
        if isinstance(backfill, dict) and backfill.get("ranges") and backfill.get("span"):
            backfill.pop("running", None)
            backfill["ranges"][0][0] = backfill["span"][0]
            value = dumps(doc)
    return value
