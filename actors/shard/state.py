"""The state of one schedule and of its runs, and its changelog JSON.

Everything a shard knows about a schedule is in a `ScheduleState` and the
`RunState` objects it owns, and every field of them (but the wheel handles,
which are rebuilt) round-trips through the changelog record `encode_schedule`
writes to ``{ns}.schedules``. A restored shard therefore is the shard that
wrote the records, which is what makes failover exact.

The changelog value of a schedule (one record per change, key = schedule id)::

    {"v": 1, "def_bytes": 431,                  # the length of the JSON of "def", last
     "id": "invoice-nightly", "kind": "schedule",
     "paused": false,
     "next": "2026-10-11T00:00:00.000Z",        # next occurrence not yet handled; null: none
     "last_fired": "2026-10-10T00:00:00.000Z",  # latest occurrence fired (or buffered)
     "runs": [                                  # in flight (running or waiting to retry)
        {"run_id": "invoice-nightly@2026-10-10T00:00:00.000Z",   # names the occurrence
         "attempt": 2,
         "fired": "...", "deadline": "...",     # of the current attempt
         "retry_at": "...",                     # only while waiting for the next attempt
         "task": "...",                         # only for a DAG task's run
         "series_start": 3,                     # only after a dlq.replay (else 1)
         "outcomes": [{"attempt": 1, "status": "failed", "fired_at": "...",   # first 2, last 3
                       "finished_at": "...", "worker": "w-1",
                       "error": {"type": "...", "message": "..."}}]}],
     "buffered": ["2026-10-10T01:00:00.000Z"],  # occurrences waiting for the run in flight
     "dead": {"invoice-nightly@...": 5},        # recent dead-lettered runs -> last attempt
     "dag": null,                               # DAG run state (see `ScheduleState.dag`)
     "def": {...}}                              # the normalised definition (definition.py)

``runs``, ``buffered``, ``dead`` and ``dag`` are left out when empty, and so are
a run's fields at their usual value (a herd writes one record per fire, so each
field costs). A deleted schedule is a tombstone (null value).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actors.shard.definition import Definition, restored_definition
from topics.timefmt import format_ms, parse_instant

# How many dead-lettered runs a schedule remembers for `dlq.replay` (oldest forgotten).
DEAD_MEMORY = 64

# Bound of the small caches below (emptied when full; they only hold pure values).
_CACHE_MAX = 100_000


class RunState:
    """One run in flight: an occurrence (or a DAG task of one) and its current attempt.

    A run is *running* while ``retry_ms`` is None (its timer is the deadline plus
    a margin) and *waiting* otherwise (its timer is the retry instant). Attempts
    of one run keep its ``run_id``; ``series_start`` is the first attempt number
    of the current series (1, or the attempt after the last one before a
    ``dlq.replay``), so the retry budget restarts on a replay while attempt
    numbers keep increasing and (run_id, attempt) stays unique.
    """

    __slots__ = (
        "attempt",
        "deadline_ms",
        "fired_ms",
        "outcomes",
        "retry_ms",
        "run_id",
        "schedule",
        "scheduled_ms",
        "series_start",
        "task",
        "timer",
    )

    def __init__(
        self,
        schedule: ScheduleState,
        run_id: str,
        scheduled_ms: int,
        task: str | None,
        attempt: int,
        series_start: int,
    ) -> None:
        self.schedule = schedule
        self.run_id = run_id
        self.scheduled_ms = scheduled_ms
        self.task = task
        self.attempt = attempt
        self.series_start = series_start
        self.fired_ms = 0
        self.deadline_ms = 0
        self.retry_ms: int | None = None
        self.outcomes: list[Mapping[str, Any]] = []  # every failed attempt, JSON-ready
        self.timer: Any = None  # the wheel's handle: deadline (running) or retry (waiting)

    @property
    def failures_in_series(self) -> int:
        return self.attempt - self.series_start + 1


class ScheduleState:
    """One schedule of the shard: its definition, where it is in time, its runs."""

    __slots__ = (
        "_definition",
        "_id_json",
        "buffered",
        "dag",
        "dead",
        "def_bytes",
        "id",
        "key",
        "last_fired_ms",
        "next_ms",
        "paused",
        "runs",
        "timer",
    )

    def __init__(self, schedule_id: str, def_bytes: bytes, definition: Definition | None) -> None:
        self.id = schedule_id
        self.key = schedule_id.encode()
        self.def_bytes = def_bytes  # normalised definition JSON, spliced into each record
        self._definition = definition  # built from def_bytes on first use after a restore
        self.paused = False
        self.next_ms: int | None = None
        self.last_fired_ms: int | None = None
        self.runs: dict[str, RunState] = {}
        self.buffered: list[int] = []
        self.dead: dict[str, int] = {}
        # --- DAG run state -------------------------------------------------------
        # Reserved for dag.upsert: per DAG run, the state of its tasks. Task runs
        # are ordinary `RunState`s (with ``task`` set) in ``runs``, so attempts,
        # retries, deadlines and the DLQ work for them unchanged; what belongs here
        # is only what a DAG adds (which tasks are done, failed, upstream_failed).
        # It is written to the changelog as "dag" verbatim, so keep it JSON-ready.
        self.dag: Any = None
        self.timer: Any = None  # the wheel's handle of the next fire
        self._id_json: str | None = None  # the id as a JSON string, for `encode_schedule`

    @property
    def definition(self) -> Definition:
        found = self._definition
        if found is None:
            found = self._definition = restored_definition(self.id, self.def_bytes)
        return found

    def set_definition(self, def_bytes: bytes, definition: Definition) -> None:
        self.def_bytes = def_bytes
        self._definition = definition

    def remember_dead(self, run_id: str, last_attempt: int) -> None:
        self.dead.pop(run_id, None)
        self.dead[run_id] = last_attempt
        while len(self.dead) > DEAD_MEMORY:
            del self.dead[next(iter(self.dead))]


def encode_schedule(state: ScheduleState) -> bytes:
    """The changelog value of ``state`` (see the module docstring).

    A herd writes one per fire, so the usual shape (nothing buffered, dead or
    DAG, runs that are plain first attempts) is spelled directly, byte for byte
    what orjson writes for it; any other state goes through orjson.
    """
    if state.buffered or state.dead or state.dag is not None:
        return _encode_general(state)
    id_json = state._id_json
    if id_json is None:
        id_json = state._id_json = orjson.dumps(state.id).decode()
    runs_json = ""
    if state.runs:
        run_prefix = id_json[:-1]  # a run id is the id, "@" and an instant: nothing to escape
        at = len(state.id)
        entries = []
        for run in state.runs.values():
            if (
                run.task is not None
                or run.series_start != 1
                or run.retry_ms is not None
                or run.outcomes
            ):
                return _encode_general(state)
            entries.append(
                f'{{"run_id":{run_prefix}{run.run_id[at:]}","attempt":{run.attempt},'
                f'"fired":"{instant_text(run.fired_ms)}",'
                f'"deadline":"{instant_text(run.deadline_ms)}"}}'
            )
        runs_json = f',"runs":[{",".join(entries)}]'
    def_bytes = state.def_bytes
    next_ms = state.next_ms
    last_ms = state.last_fired_ms
    next_json = "null" if next_ms is None else f'"{instant_text(next_ms)}"'
    last_json = "null" if last_ms is None else f'"{instant_text(last_ms)}"'
    paused_json = "true" if state.paused else "false"
    head = (
        f'{{"v":1,"def_bytes":{len(def_bytes)},"id":{id_json},"kind":"schedule",'
        f'"paused":{paused_json},"next":{next_json},"last_fired":{last_json}{runs_json},"def":'
    )
    return head.encode() + def_bytes + b"}"


def _encode_general(state: ScheduleState) -> bytes:
    next_ms = state.next_ms
    last_ms = state.last_fired_ms
    def_bytes = state.def_bytes
    doc: dict[str, Any] = {
        "v": 1,
        # The definition goes last and its length first, so a restore can parse the
        # small rest of the record and slice the definition's bytes off its tail
        # (parsing the definition would cost most of a restore, for nothing).
        "def_bytes": len(def_bytes),
        "id": state.id,
        "kind": "schedule",
        "paused": state.paused,
        "next": None if next_ms is None else instant_text(next_ms),
        "last_fired": None if last_ms is None else instant_text(last_ms),
    }
    if state.runs:
        doc["runs"] = [_encode_run(run) for run in state.runs.values()]
    if state.buffered:
        doc["buffered"] = [instant_text(o) for o in state.buffered]
    if state.dead:
        doc["dead"] = state.dead
    if state.dag is not None:
        doc["dag"] = state.dag
    doc["def"] = orjson.Fragment(def_bytes)
    return orjson.dumps(doc)


def _encode_run(run: RunState) -> dict[str, Any]:
    # Fields at their usual value are left out: a herd writes one of these per fire.
    entry: dict[str, Any] = {
        "run_id": run.run_id,
        "attempt": run.attempt,
        "fired": instant_text(run.fired_ms),
        "deadline": instant_text(run.deadline_ms),
    }
    if run.task is not None:
        entry["task"] = run.task
    if run.series_start != 1:
        entry["series_start"] = run.series_start
    if run.retry_ms is not None:
        entry["retry_at"] = instant_text(run.retry_ms)
    if run.outcomes:
        entry["outcomes"] = run.outcomes
    return entry


def decode_schedule(value: bytes) -> ScheduleState:
    """A schedule from its changelog value, without timers (`ShardCore` adds them).

    Raises ``ValueError`` (or ``KeyError``/``TypeError``) on a record this version
    did not write.
    """
    doc, def_bytes = _split(value)
    if doc.get("v") != 1 or doc.get("kind") != "schedule":
        raise ValueError(f"not a schedule record of version 1: v={doc.get('v')!r}")
    state = ScheduleState(doc["id"], intern_bytes(def_bytes), None)
    state.paused = doc["paused"]
    text = doc["next"]
    state.next_ms = None if text is None else instant_ms(text)
    text = doc["last_fired"]
    state.last_fired_ms = None if text is None else instant_ms(text)
    runs = doc.get("runs")
    if runs:
        at = len(state.id) + 1  # the scheduled instant is spelled inside the run id
        for entry in runs:
            run_id = entry["run_id"]
            run = RunState(
                state,
                run_id,
                instant_ms(run_id[at : at + 24]),
                entry.get("task"),
                entry["attempt"],
                entry.get("series_start", 1),
            )
            run.fired_ms = instant_ms(entry["fired"])
            run.deadline_ms = instant_ms(entry["deadline"])
            retry_at = entry.get("retry_at")
            run.retry_ms = None if retry_at is None else instant_ms(retry_at)
            run.outcomes = entry.get("outcomes") or []
            state.runs[run_id] = run
    buffered = doc.get("buffered")
    if buffered:
        state.buffered = [instant_ms(text) for text in buffered]
    dead = doc.get("dead")
    if dead:
        state.dead = dead
    state.dag = doc.get("dag")
    return state


_HEAD = b'{"v":1,"def_bytes":'
_DEF_KEY = b',"def":'


def _split(value: bytes) -> tuple[dict[str, Any], bytes]:
    """The record without its definition (parsed), and the definition's JSON bytes.

    The fast path reads the layout `encode_schedule` writes; any other layout of
    the same JSON (a record rewritten by a tool) is parsed whole.
    """
    if value.startswith(_HEAD):
        comma = value.find(b",", len(_HEAD))
        digits = value[len(_HEAD) : comma]
        if comma > 0 and digits.isdigit():
            start = len(value) - 1 - int(digits)
            key_at = start - len(_DEF_KEY)
            if key_at > 0 and value[key_at:start] == _DEF_KEY and value[-1:] == b"}":
                return orjson.loads(value[:key_at] + b"}"), value[start:-1]
    doc = orjson.loads(value)
    return doc, orjson.dumps(doc["def"])


_interned: dict[bytes, bytes] = {}


def intern_bytes(data: bytes) -> bytes:
    """One shared object per distinct definition: a million schedules restored from
    the changelog that say the same thing hold one copy of it, not a million."""
    found = _interned.get(data)
    if found is None:
        if len(_interned) >= _CACHE_MAX:
            _interned.clear()
        found = _interned[data] = data
    return found


_second_prefix: dict[int, str] = {}
_MILLIS = [f".{ms:03d}Z" for ms in range(1000)]


_texts: dict[int, str] = {}


def instant_text(instant_ms: int) -> str:
    """`format_ms` with a cache: a herd fires thousands of runs per second and each
    run and changelog record carries several instants of that same second."""
    text = _texts.get(instant_ms)
    if text is not None:
        return text
    if len(_texts) >= _CACHE_MAX:
        _texts.clear()
    text = _texts[instant_ms] = _instant_text(instant_ms)
    return text


def _instant_text(instant_ms: int) -> str:
    second, ms = divmod(instant_ms, 1000)
    prefix = _second_prefix.get(second)
    if prefix is None:
        if len(_second_prefix) >= _CACHE_MAX:
            _second_prefix.clear()
        prefix = _second_prefix[second] = format_ms(second * 1000)[:19]
    return prefix + _MILLIS[ms]


_second_ms: dict[str, int] = {}


def instant_ms(text: str) -> int:
    """`parse_instant` with a fast path for the exact form `format_ms` writes.

    A restore parses an instant or two per record, mostly of the same few
    seconds; ``YYYY-MM-DDTHH:MM:SS.mmmZ`` is read as a cached second plus the
    milliseconds instead of through ``datetime.fromisoformat``.
    """
    if len(text) == 24 and text[19] == "." and text[23] == "Z":
        second = text[:19]
        base = _second_ms.get(second)
        if base is None:
            base = parse_instant(second + "Z")
            if len(_second_ms) >= _CACHE_MAX:
                _second_ms.clear()
            _second_ms[second] = base
        millis = text[20:23]
        if millis.isdigit():
            return base + int(millis)
    return parse_instant(text)
