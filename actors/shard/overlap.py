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

from enum import StrEnum

from topics.vocabulary import OverlapPolicy

# A bound on the queue of one schedule: an every-second job whose run hangs for a
# day must not grow the changelog record without limit.
BUFFER_ALL_MAX = 1000

# The same for ``allow``: every run in flight is in the schedule's changelog record
# (with its attempts' outcomes), and an every-second job with a one-hour timeout
# and its workers down would otherwise hold thousands.
ALLOW_MAX_IN_FLIGHT = 100


class Decision(StrEnum):
    """What one occurrence does (internal to the shard: never on the wire)."""

    START = "start"  # fire now (nothing in flight, or allow)
    DROP = "drop"  # report skipped
    BUFFER = "buffer"  # append to the waiting occurrences
    REPLACE = "replace"  # the waiting occurrences are reported skipped, this one waits
    CANCEL = "cancel"  # cancel the runs in flight, then start


def decide(policy: OverlapPolicy, *, in_flight: bool, waiting: int, running: int = 0) -> Decision:
    """The decision for one occurrence; ``running`` is the number of runs in flight."""
    if not in_flight:
        return Decision.START
    if policy == OverlapPolicy.ALLOW:
        return Decision.START if running < ALLOW_MAX_IN_FLIGHT else Decision.DROP
    if policy == OverlapPolicy.BUFFER_ONE:
        return Decision.REPLACE if waiting else Decision.BUFFER
    if policy == OverlapPolicy.BUFFER_ALL:
        return Decision.BUFFER if waiting < BUFFER_ALL_MAX else Decision.DROP
    if policy == OverlapPolicy.CANCEL_OTHER:
        return Decision.CANCEL
    return Decision.DROP
