"""A schedule's definition: what an upsert said, in the form the shard works with.

The changelog stores the definition *normalised* (every default filled in, one
fixed key order; see `definition_doc`) rather than the command as the user wrote
it. Two reasons. Rebuilding needs no validator: the command was validated once,
when it was applied, so a restore only reads fields back. And identical
definitions serialise to identical bytes, which makes the bytes a cache key:
a million schedules that say the same thing share ONE `Definition` object and
one compiled spec, which is what makes a restore cheap in time and memory.

A compiled spec depends on the schedule id only through Jenkins ``H`` fields and
the spread offset; when neither is present the spec is shared by every schedule
with the same expression, zone, DST policy and bounds, else it is per schedule.
Both caches are bounded and only ever hold pure values, so their contents never
change what a shard emits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actors.timespec import CompiledSpec, compile_spec
from topics.alerts import Deadline
from topics.commands import Job, MisfirePolicy, RetryPolicy, ScheduleUpsert
from topics.concurrency import concurrency_of
from topics.key_templates import (
    RENDERED_MARK,
    job_marks_templates,
    names_schedule_id,
    rendered_job,
    renders_keys,
)
from topics.priority import DEFAULT_PRIORITY, in_lane, placement_of
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import rate_limit_of
from topics.targets import KAFKA_JOB, KafkaDelivery
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import JitterMode, MisfireMode, OverlapPolicy

# Entries kept per cache before it is emptied (a crude bound: refilling is cheap).
_CACHE_MAX = 65_536


class Definition:
    """The parts of a schedule the shard consults while firing; immutable, shared."""

    __slots__ = (
        "_fire_parts",
        "_job_json",
        "_job_text",
        "compiled",
        "deadline",
        "delivery",
        "grace_ms",
        "is_at",
        "job",
        "max_runs",
        "misfire",
        "overlap",
        "queue",
        "retry",
        "run_job",
        "timeout_ms",
        "timeout_s",
    )

    def __init__(
        self,
        *,
        compiled: CompiledSpec,
        job: Job,
        misfire: MisfirePolicy,
        overlap: OverlapPolicy,
        retry: RetryPolicy,
        timeout_s: int,
        is_at: bool,
        max_runs: int | None = None,
        deadline: Deadline | None = None,
        schedule_id: str = "",
        templates: bool = True,
    ) -> None:
        self.compiled = compiled
        # Each run's start and end deadlines after its instant, in ms (`deadlines`).
        self.deadline: tuple[int | None, int | None] | None = (
            None
            if deadline is None
            else (
                None if deadline.start_within_s is None else deadline.start_within_s * 1000,
                None if deadline.finish_within_s is None else deadline.finish_within_s * 1000,
            )
        )
        self.max_runs = max_runs  # at most this many runs ever start (None: no limit)
        self.job = job  # as the upsert said it: keys as templates (the changelog's)
        # As its run records carry it: keys rendered (`topics.key_templates`), once here,
        # never per fire; ``job`` itself without a templated key. ``schedule_id`` matters
        # only when a key names it, and then the definition is the schedule's own
        # (`_depends_on_id`). ``templates`` False: a changelog written before keys had
        # placeholders, whose keys are literal (`key_templates.RENDERED_MARK`).
        self.run_job = rendered_job(job, schedule_id, templates)
        self.misfire = misfire
        self.overlap = overlap
        self.retry = retry
        self.timeout_s = timeout_s
        self.timeout_ms = timeout_s * 1000
        self.grace_ms = misfire.grace_s * 1000
        self.is_at = is_at  # a one-off: created late (within grace), it still fires
        # A Kafka target's record, made ready once: the shard writes it instead of a run.
        self.delivery = KafkaDelivery.of(job.args) if job.name == KAFKA_JOB else None
        # The job's queue, None for the default one without a concurrency key: the
        # herd's path tests this alone (a keyed run is placed by its key, §8.2); a
        # priority of the high lane places it there (``Q.hi``, §8.4).
        self.queue: str | None = (
            None
            if job.queue == DEFAULT_QUEUE
            and job.concurrency is None
            and job.rate_limit is None
            and not in_lane(job.priority)
            else placement_of(job.queue, job.priority)
        )
        self._job_json: orjson.Fragment | None = None
        self._job_text: str | None = None
        self._fire_parts: FireParts | None = None

    def job_json(self) -> orjson.Fragment:
        """The job as the JSON every run record of this definition carries, encoded
        once (a definition is shared by all the schedules that say the same)."""
        found = self._job_json
        if found is None:
            found = self._job_json = orjson.Fragment(self.job_text())
        return found

    def job_text(self) -> str:
        """`job_json` as text."""
        found = self._job_text
        if found is None:
            found = self._job_text = orjson.dumps(self.run_job.wire()).decode()
        return found

    def fire_parts(self, now_ms: int) -> FireParts:
        """The text of this definition's run records fired at ``now_ms`` (see `FireParts`).

        One `advance` fires thousands of schedules at the same ``now_ms``, and every
        schedule with this definition shares these; only the last is kept.
        """
        parts = self._fire_parts
        if parts is None or parts.now_ms != now_ms:
            parts = self._fire_parts = FireParts(
                now_ms,
                self.timeout_ms,
                self.job_text(),
                report_start=self.deadline is not None and self.deadline[0] is not None,
            )
        return parts


class FireParts:
    """The parts of a run record (and of its changelog entry) that depend only on the
    definition and the instant it fires, spelled once for every schedule fired then.

    A run record is ``run_value``'s very bytes::

        {"v":1,"run_id":"ID@SCHED","schedule_id":"ID","scheduled_at":"SCHED"
         ","fired_at":"NOW","attempt":N,"job":{...},"idempotency_key":"KEY"
         ","deadline":"DEADLINE"}   (plus ,"report_start":true under a start deadline)

    so only the id, the scheduled instant, the attempt and the key differ between
    schedules fired at one instant (`actors.shard.runs` splices them in).
    """

    __slots__ = (
        "after_attempt",
        "before_attempt",
        "deadline_ms",
        "first_attempt",
        "now_ms",
        "tail",
    )

    def __init__(
        self, now_ms: int, timeout_ms: int, job_text: str, *, report_start: bool = False
    ) -> None:
        self.now_ms = now_ms
        self.deadline_ms = deadline_ms = now_ms + timeout_ms
        self.before_attempt = f'","fired_at":"{format_ms(now_ms)}","attempt":'
        self.after_attempt = f',"job":{job_text},"idempotency_key":"'
        self.first_attempt = f"{self.before_attempt}1{self.after_attempt}"
        # A start deadline asks the worker to report the start (`topics.alerts`).
        flag = ',"report_start":true' if report_start else ""
        self.tail = f'","deadline":"{format_ms(deadline_ms)}"{flag}}}'


def definition_doc(command: ScheduleUpsert) -> dict[str, Any]:
    """The normalised changelog form of an upsert (JSON-ready, fixed key order)."""
    retry = command.retry
    misfire = command.misfire
    doc: dict[str, Any] = {
        "spec": dict(command.spec),
        "job": command.job.wire(),
        "misfire": {
            "policy": misfire.policy,
            "grace_s": misfire.grace_s,
            "catch_up_max": misfire.catch_up_max,
        },
        "overlap": command.overlap,
        "dst": {"gap": command.dst["gap"], "fold": command.dst["fold"]},
        "spread_window_s": command.spread_window_s,
        "retry": {
            "max_attempts": retry.max_attempts,
            "initial_s": retry.initial_s,
            "coefficient": retry.coefficient,
            "max_interval_s": retry.max_interval_s,
            "jitter": retry.jitter,
            "non_retryable": list(retry.non_retryable),
        },
        "timeout_s": command.timeout_s,
        "start": None if command.start_ms is None else format_ms(command.start_ms),
        "end": None if command.end_ms is None else format_ms(command.end_ms),
    }
    if command.max_runs is not None:  # only then: the bytes of every other stay as they were
        doc["max_runs"] = command.max_runs
    if command.deadline is not None:  # likewise
        doc["deadline"] = command.deadline.wire()
    if job_marks_templates(command.job):  # likewise: its keys are templates, not literal
        doc[RENDERED_MARK] = True
    return doc


def definition_bytes(command: ScheduleUpsert) -> bytes:
    return orjson.dumps(definition_doc(command))


def _depends_on_id(spec: Mapping[str, Any], spread_window_s: int) -> bool:
    # Conservative: any "h" in a cron expression (even in "THU") counts as Jenkins H,
    # the crons of an any spec's members and exclusions included (docs/DESIGN.md §5.6).
    return spread_window_s > 0 or _cron_has_h(spec)


depends_on_id = _depends_on_id  # for the shard's calendar binding (`actors.shard.calendars`)


def _cron_has_h(spec: Mapping[str, Any]) -> bool:
    cron = spec.get("cron")
    if isinstance(cron, str) and "h" in cron.lower():
        return True
    nested = [*(spec.get("any") or []), *(spec.get("exclude") or [])] if "any" in spec else []
    return any(isinstance(part, Mapping) and _cron_has_h(part) for part in nested)


# Keyed by the definition's bytes alone when it does not depend on the schedule's id
# (the herd's lookup then builds no tuple), by (bytes, id) when it does.
_definitions: dict[bytes | tuple[bytes, str], Definition] = {}
_specs: dict[tuple[bytes, str | None], CompiledSpec] = {}


def _keyed_by_id(job: Job) -> bool:
    """Does a key of ``job`` name ``{schedule_id}`` (its rendered job is the schedule's
    own, so its definition cannot be shared by bytes alone)?"""
    return any(
        found is not None and names_schedule_id(found.key)
        for found in (job.concurrency, job.rate_limit)
    )


def _keys_of(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The concurrency and rate-limit objects of a changelog's job."""
    return [found for found in (job.get("concurrency"), job.get("rate_limit")) if found]


def shared_definition(command: ScheduleUpsert, def_bytes: bytes) -> Definition:
    """The `Definition` of an upsert just decoded (its spec is already compiled)."""
    keyed = _keyed_by_id(command.job)
    owner = command.id if keyed or _depends_on_id(command.spec, command.spread_window_s) else None
    found = _definitions.get(_definition_key(def_bytes, owner))
    if found is not None:
        return found
    # A key naming the id makes the definition the schedule's own, not its spec.
    spec_owner = command.id if _depends_on_id(command.spec, command.spread_window_s) else None
    definition = Definition(
        compiled=_share_spec(command.compiled, _spec_key(orjson.loads(def_bytes)), spec_owner),
        job=command.job,
        misfire=command.misfire,
        overlap=command.overlap,
        retry=command.retry,
        timeout_s=command.timeout_s,
        is_at="at" in command.spec,
        max_runs=command.max_runs,
        deadline=command.deadline,
        schedule_id=command.id,
    )
    _remember(_definitions, _definition_key(def_bytes, owner), definition)
    return definition


def cached_definition(def_bytes: bytes) -> Definition | None:
    """The shared `Definition` of ``def_bytes`` if one was built already and does not
    depend on the schedule's id (the common case of a restore: no decoding at all)."""
    return _definitions.get(def_bytes)


def restored_schedule_definition(
    schedule_id: str, def_bytes: bytes, doc: Mapping[str, Any]
) -> Definition:
    """The `Definition` of a schedule (not a DAG) behind changelog bytes written by
    `definition_bytes`, ``doc`` their decoded JSON (see `actors.shard.restored`).

    Raises ``SpecError`` or ``ValueError`` only if the bytes were not written by
    this version (or the zone database lost a zone).
    """
    spec = doc["spec"]
    spec_owner = schedule_id if _depends_on_id(spec, doc["spread_window_s"]) else None
    job = doc["job"]
    templates = renders_keys(doc)
    keyed = templates and any(names_schedule_id(found.get("key")) for found in _keys_of(job))
    owner = schedule_id if keyed else spec_owner
    found = _definitions.get(_definition_key(def_bytes, owner))
    if found is not None:
        return found
    compiled = _specs.get((_spec_key(doc), spec_owner))
    if compiled is None:
        compiled = compile_spec(
            spec,
            schedule_id=schedule_id,
            dst=doc["dst"],
            spread_window_s=doc["spread_window_s"],
            start_ms=None if doc["start"] is None else parse_instant(doc["start"]),
            end_ms=None if doc["end"] is None else parse_instant(doc["end"]),
        )
        _remember(_specs, (_spec_key(doc), spec_owner), compiled)
    retry, misfire = doc["retry"], doc["misfire"]
    definition = Definition(
        compiled=compiled,
        job=Job(
            job["name"],
            job["args"],
            job.get("queue", DEFAULT_QUEUE),
            concurrency_of(job),
            job.get("priority", DEFAULT_PRIORITY),
            rate_limit_of(job),
        ),
        misfire=MisfirePolicy(
            MisfireMode(misfire["policy"]), misfire["grace_s"], misfire["catch_up_max"]
        ),
        overlap=OverlapPolicy(doc["overlap"]),
        retry=RetryPolicy(
            max_attempts=retry["max_attempts"],
            initial_s=retry["initial_s"],
            coefficient=retry["coefficient"],
            max_interval_s=retry["max_interval_s"],
            jitter=JitterMode(retry["jitter"]),
            non_retryable=tuple(retry["non_retryable"]),
        ),
        timeout_s=doc["timeout_s"],
        is_at="at" in spec,
        max_runs=doc.get("max_runs"),
        deadline=deadline_of(doc.get("deadline")),
        schedule_id=schedule_id,
        templates=templates,
    )
    _remember(_definitions, _definition_key(def_bytes, owner), definition)
    return definition


def clear_caches() -> None:
    """Forget every shared definition and compiled spec (tests and benchmarks)."""
    _definitions.clear()
    _specs.clear()


def _definition_key(def_bytes: bytes, owner: str | None) -> bytes | tuple[bytes, str]:
    return def_bytes if owner is None else (def_bytes, owner)


def _spec_key(doc: Mapping[str, Any]) -> bytes:
    """Everything `compile_spec` reads, as bytes."""
    return orjson.dumps(
        [doc["spec"], doc["dst"], doc["spread_window_s"], doc["start"], doc["end"]],
        option=orjson.OPT_SORT_KEYS,
    )


def _share_spec(compiled: CompiledSpec, spec_key: bytes, owner: str | None) -> CompiledSpec:
    key = (spec_key, owner)
    found = _specs.get(key)
    if found is not None:
        return found
    _remember(_specs, key, compiled)
    return compiled


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = value


def deadline_of(wire: Mapping[str, Any] | None) -> Deadline | None:
    """The `Deadline` a changelog definition holds (`definition_doc`, `dag_definition_doc`)."""
    if wire is None:
        return None
    return Deadline(wire.get("start_within_s"), wire.get("finish_within_s"))
