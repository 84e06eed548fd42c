"""Overlap: what an occurrence does when a run of its schedule is still in flight.

A run is *in flight* from its first attempt until its terminal outcome: success,
cancellation, the dead-letter queue, or ``delete``. Waiting for a retry is still
in flight (the run has not finished), so a failing job does not pile up runs.
Retries and ``dlq.replay`` never consult the policy: they continue a run that
already started; occurrences and ``schedule.trigger`` do (as Temporal's trigger).

============  ===============================================================
policy        an occurrence due while a run is in flight ...
============  ===============================================================
allow         starts at once, alongside, up to `ALLOW_MAX_IN_FLIGHT` runs in
              flight; beyond, ``skipped``
skip          is reported ``skipped`` and never runs
buffer_one    waits; a newer one replaces it (the replaced one is reported
              ``skipped``), so at most one waits
buffer_all    waits in order, up to `BUFFER_ALL_MAX`; beyond, ``skipped``
cancel_other  cancels every run in flight (each reported ``cancelled`` by the
              shard, its later results ignored) and starts at once
============  ===============================================================

A waiting occurrence starts, with its own scheduled time (so its run id), when
no run is in flight any more; one at a time, and not while the schedule is paused.
"""

from __future__ import annotations

# A bound on the queue of one schedule: an every-second job whose run hangs for a
# day must not grow the changelog record without limit.
BUFFER_ALL_MAX = 1000

# The same for ``allow``: every run in flight is in the schedule's changelog record
# (with its attempts' outcomes), and an every-second job with a one-hour timeout
# and its workers down would otherwise hold thousands.
ALLOW_MAX_IN_FLIGHT = 100

ALLOW = "allow"
SKIP = "skip"
BUFFER_ONE = "buffer_one"
BUFFER_ALL = "buffer_all"
CANCEL_OTHER = "cancel_other"

# Decisions.
START = "start"  # fire now (nothing in flight, or allow)
DROP = "drop"  # report skipped
BUFFER = "buffer"  # append to the waiting occurrences
REPLACE = "replace"  # the waiting occurrences are reported skipped, this one waits
CANCEL = "cancel"  # cancel the runs in flight, then start


def decide(policy: str, *, in_flight: bool, waiting: int, running: int = 0) -> str:
    """The decision for one occurrence (one of the decisions above); ``running`` is
    the number of runs in flight."""
    if not in_flight:
        return START
    if policy == ALLOW:
        return START if running < ALLOW_MAX_IN_FLIGHT else DROP
    if policy == BUFFER_ONE:
        return REPLACE if waiting else BUFFER
    if policy == BUFFER_ALL:
        return BUFFER if waiting < BUFFER_ALL_MAX else DROP
    if policy == CANCEL_OTHER:
        return CANCEL
    return DROP
