"""The words of the wire contract as types: statuses, policies and DAG task states.

Each enum's values are exactly the strings that travel on the topics (commands,
results, the changelog), so a member is interchangeable with its string: a
`StrEnum` member compares equal to it, hashes like it and is written by orjson
as it. Code names a member (``RunStatus.SUCCEEDED``) instead of spelling the
string, so a typo is an error where it is written, not a status nobody reads.
The values are part of the public contract (docs/DESIGN.md §2); a test pins them.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A result's ``status`` (docs/DESIGN.md §2.4). Workers write the first four; the
    shard itself writes ``skipped`` (overlap), ``missed`` (misfire) and
    ``upstream_failed`` (a DAG dependency failed), and ``cancelled`` for runs it
    cancels before a worker reports them. ``running`` is not an outcome: it is a
    worker's progress report for an attempt still running (``ctx.heartbeat``), kept
    out of the one-result-per-attempt rule (the shard ignores it, readers of outcomes
    skip it), so it is in no set of final statuses."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    MISSED = "missed"
    UPSTREAM_FAILED = "upstream_failed"
    RUNNING = "running"


SHARD_DECIDED = frozenset((RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.UPSTREAM_FAILED))
"""Statuses only a shard writes: the attempt never reached a worker."""

FOLDED = frozenset((RunStatus.MISSED, RunStatus.SKIPPED))
"""Statuses whose result may stand for a range of occurrences (`topics.covers`)."""


class OverlapPolicy(StrEnum):
    """``overlap``: what an occurrence does while a run of its schedule is in flight
    (`actors.shard.overlap` states each rule)."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"


class ConcurrencyStrategy(StrEnum):
    """A concurrency key's ``strategy`` when a run finds the key at its limit
    (docs/DESIGN.md §8.2, `topics.concurrency`)."""

    QUEUE = "queue"
    CANCEL_NEWEST = "cancel_newest"
    CANCEL_IN_PROGRESS = "cancel_in_progress"


class MisfireMode(StrEnum):
    """``misfire.policy``: what to do with occurrences missed while no shard owned the
    schedule (`actors.shard.misfire`)."""

    RUN_ONCE = "run_once"
    CATCH_UP = "catch_up"
    SKIP = "skip"


class JitterMode(StrEnum):
    """``retry.jitter``: ``full`` draws the wait uniformly in [0, wait]; ``none`` waits it."""

    FULL = "full"
    NONE = "none"


class DstGap(StrEnum):
    """``dst.gap``: a local time the clocks skip over fires at the first valid instant
    after it (``shift``) or not at all (``skip``)."""

    SHIFT = "shift"
    SKIP = "skip"


class DstFold(StrEnum):
    """``dst.fold``: a local time the clocks pass twice fires on its first pass only
    (``once``) or on both (``twice``)."""

    ONCE = "once"
    TWICE = "twice"


class TaskState(StrEnum):
    """The state of one task of a DAG run in the changelog (docs/DESIGN.md §6), and the
    keys of a DAG run result's ``counts``. A task's final state is one of the run
    statuses of the same name; ``waiting`` and ``running`` are never final, and
    ``removed`` ends a task the DAG no longer has."""

    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UPSTREAM_FAILED = "upstream_failed"
    REMOVED = "removed"


class DagRunState(StrEnum):
    """The state of a DAG run as a whole in the changelog: ``running`` until every task
    has ended, then ``succeeded`` or ``failed``, or ``cancelled`` once a ``run.cancel``
    of the whole run has ended its tasks."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
