"""Rate limits: at most ``per_s`` starts a second of the runs naming a key, with bursts
of ``burst``, across every schedule and every worker of a namespace (docs/DESIGN.md
§8.5).

A job names its key, ``"job": {"name": ..., "rate_limit": {"key": "payments",
"per_s": 10, "burst": 5}}``. The shard writes every run of the key to one partition
of its queue's topic (murmur2 of the key, as for a concurrency key, `placed_by`), so
the partition's owner holds the key's token bucket alone, in its pure machine
(`actors/worker/ratelimit.py`); a next owner starts the bucket empty.

A job may name both a concurrency key and a rate limit only with the same key: a run
is placed by one key, and a rate limit's bucket split over two partitions would let
twice its rate through.

Pauses: ``ratelimit.pause`` (``id`` is the key, optionally ``until`` and ``note``)
and ``ratelimit.resume`` are commands like every other, validated by the shard that
reads them and written by it to the compacted ``{ns}.ratelimits`` topic (key: the
rate-limit key; value: the pause; null: resumed), which every worker reads whole.
Runs of a paused key wait on their worker, visibly; their deadlines still apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topics import codec
from topics.command_fields import (
    FieldError,
    check_keys,
    instant,
    integer,
    number,
    obj,
    string,
)
from topics.templates import template_names
from topics.timefmt import format_ms, parse_instant

MAX_KEY_CHARS = 200
MAX_PER_S = 100_000
MAX_BURST = 100_000
DEFAULT_BURST = 1
RATE_SCALE = 1000
"""``per_s`` is kept as an integer number of starts per 1,000 s (``per_ks``): a rate
is a multiple of 0.001/s, and the bucket's arithmetic is exact in integers."""
MAX_PAUSE_NOTE_CHARS = 500
RATE_PAUSE_TYPE = "ratelimit.pause"
RATE_RESUME_TYPE = "ratelimit.resume"
RATE_WAIT_ERROR = "Timeout"
"""The ``error.type`` of a run whose deadline passed while it waited for its key (a
timeout like any other: the retry policy decides what follows)."""

_EXAMPLE = '{"key": "payments", "per_s": 10, "burst": 5}'
_FORBIDDEN = "@/"
_ENVELOPE = ("v", "type", "id")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A job's rate limit: at most ``per_s`` starts a second of ``key``'s runs, with up
    to ``burst`` at once after a quiet while."""

    key: str
    per_s: float
    burst: int = DEFAULT_BURST

    @property
    def per_ks(self) -> int:
        """Starts per 1,000 s, an integer (`RATE_SCALE`)."""
        return round(self.per_s * RATE_SCALE)

    def wire(self) -> dict[str, Any]:
        """As a command and a run record spell it (a whole rate as an integer)."""
        per_s: float | int = self.per_s
        if float(per_s).is_integer():
            per_s = int(per_s)
        return {"key": self.key, "per_s": per_s, "burst": self.burst}


def check_key(value: Any, path: str) -> str:
    """A rate-limit key: 1-200 printable characters, none of ``@`` ``/`` (the key is
    also the id of its pause commands)."""
    key = string(value, path, max_chars=MAX_KEY_CHARS)
    if not key.isprintable():
        raise FieldError(f"{path}: control characters are not allowed")
    for char in _FORBIDDEN:
        if char in key:
            raise FieldError(
                f"{path}: {key!r} contains {char!r}; a rate-limit key is also the id of its"
                " ratelimit.pause command: use letters, digits, '-', '_', ':' or '.'"
            )
    return key


def check_rate_limit(value: Any, path: str = "rate_limit") -> RateLimit:
    """A valid rate-limit object; `FieldError` naming the field otherwise."""
    found = obj(value, path, _EXAMPLE)
    check_keys(found, path, ("key", "per_s", "burst"))
    key = check_key(found.get("key"), f"{path}.key")
    per_s = number(found.get("per_s"), f"{path}.per_s", low=0.001, high=MAX_PER_S, unit="per s")
    scaled = per_s * RATE_SCALE
    if abs(scaled - round(scaled)) > 1e-6:
        raise FieldError(f"{path}.per_s: at most 3 decimals (a multiple of 0.001), got {per_s}")
    burst = found.get("burst")
    return RateLimit(
        key,
        per_s,
        DEFAULT_BURST if burst is None else integer(burst, f"{path}.burst", low=1, high=MAX_BURST),
    )


def check_with_concurrency(rate_limit: RateLimit | None, concurrency_key: str | None) -> None:
    """A job naming both keys: refused unless they are the same key (see the module)."""
    if rate_limit is None or concurrency_key is None or rate_limit.key == concurrency_key:
        return
    raise FieldError(
        f"job.rate_limit.key: {rate_limit.key!r} differs from the concurrency key"
        f" {concurrency_key!r}; a run is placed by one key, so give both the same key"
        " (or drop one)"
    )


def rate_limit_of(job: Any) -> RateLimit | None:
    """The rate limit of a job as `Job.wire` wrote it (a changelog's definition)."""
    found = job.get("rate_limit")
    if found is None:
        return None
    return RateLimit(found["key"], found["per_s"], found.get("burst", DEFAULT_BURST))


def parse_rate_limit(value: Any, path: str) -> RateLimit | None:
    """The rate limit of a run record's job (None without one); ValueError if bad."""
    if value is None:
        return None
    try:
        return check_rate_limit(value, path)
    except FieldError as error:
        raise ValueError(str(error)) from None


def placed_by(concurrency: Any, rate_limit: RateLimit | None) -> str | None:
    """The key a run is placed by (its partition is murmur2 of it): its concurrency
    key, else its rate-limit key (the two are equal when both are given); None: the
    run is placed by its schedule id, as always."""
    if concurrency is not None:
        key: str = concurrency.key
        return key
    return None if rate_limit is None else rate_limit.key


# --- pauses ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RatePause:
    """``ratelimit.pause``: the runs of key ``id`` wait until ``until_ms`` (None: until
    ``ratelimit.resume``)."""

    id: str
    until_ms: int | None = None
    note: str | None = None
    by: str | None = None

    def value(self, at_ms: int) -> bytes:
        """The record the shard writes to ``{ns}.ratelimits`` (``at``: when applied)."""
        body: dict[str, Any] = {"v": 1, "paused": True, "at": format_ms(at_ms)}
        if self.until_ms is not None:
            body["until"] = format_ms(self.until_ms)
        if self.note is not None:
            body["note"] = self.note
        if self.by is not None:
            body["by"] = self.by
        return codec.dumps(body)


@dataclass(frozen=True, slots=True)
class RateResume:
    """``ratelimit.resume``: the key's runs start again (a tombstone)."""

    id: str


@dataclass(frozen=True, slots=True)
class PauseState:
    """A key's pause as ``{ns}.ratelimits`` holds it."""

    until_ms: int | None
    note: str | None
    at_ms: int
    by: str | None = None

    def holds(self, now_ms: int) -> bool:
        """Do the key's runs wait at ``now_ms``?"""
        return self.until_ms is None or now_ms < self.until_ms

    def json(self) -> dict[str, Any]:
        return {
            "until": None if self.until_ms is None else format_ms(self.until_ms),
            "note": self.note,
            "at": format_ms(self.at_ms),
            "by": self.by,
        }


def decode_pause_value(value: bytes, key: str) -> PauseState:
    """A ``{ns}.ratelimits`` record's pause; ValueError naming the field otherwise."""
    body = codec.loads(value)
    if not isinstance(body, dict) or body.get("v") != 1 or body.get("paused") is not True:
        raise ValueError(f'rate limit {key!r}: expected {{"v": 1, "paused": true, ...}}')
    until, note, by = body.get("until"), body.get("note"), body.get("by")
    return PauseState(
        None if until is None else parse_instant(until),
        note if isinstance(note, str) else None,
        parse_instant(body["at"]),
        by if isinstance(by, str) else None,
    )


def check_not_template(key: str, path: str) -> None:
    """`FieldError` for a pause naming a key with a key's placeholders
    (``invoice-{args.customer}``): no run carries it, the runs carry the rendered key
    (docs/DESIGN.md §8.2), so the pause would hold nothing."""
    if "{" not in key:
        return
    for token, name in template_names(key):
        if name is not None and (name == "schedule_id" or name.startswith("args.")):
            raise FieldError(
                f"{path}: {key!r} names the placeholder {token}, but the runs carry the"
                " key it renders to: pause the rendered key (kafkron ls shows it beside"
                " the template, e.g. invoice-c-42)"
            )


def decode_rate_pause(body: dict[str, Any], key: str, now_ms: int | None) -> RatePause:
    check_keys(body, "", (*_ENVELOPE, "until", "note", "by"))
    check_key(key, "id")
    check_not_template(key, "id")
    until, note, by = body.get("until"), body.get("note"), body.get("by")
    until_ms = None if until is None else instant(until, "until")
    if until_ms is not None and now_ms is not None and until_ms <= now_ms:
        raise FieldError(
            f"until: {until} has passed; give a later instant, or resume the key with"
            " ratelimit.resume"
        )
    return RatePause(
        key,
        until_ms,
        None if note is None else string(note, "note", max_chars=MAX_PAUSE_NOTE_CHARS),
        None if by is None else string(by, "by", max_chars=200),
    )


def decode_rate_resume(body: dict[str, Any], key: str) -> RateResume:
    check_keys(body, "", _ENVELOPE)
    check_key(key, "id")
    return RateResume(key)
