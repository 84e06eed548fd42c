"""Targets: what an occurrence does when it is not a Python job.

A ``schedule.upsert`` carries either ``job`` or ``target``, never both::

    "target": {"kafka": {"topic": "orders.due", "key": "{schedule_id}",
                         "value": {"order": "o-1", "due": "{scheduled_at}"},
                         "headers": {"source": "kafkron"}}}
    "target": {"http": {"url": "https://billing.example/charge", "method": "POST",
                        "headers": {"Authorization": {"secret": "billing-api"}},
                        "body": {"run": "{run_id}"}, "timeout_s": 10}}

**kafka**: the owning shard writes the record to ``topic`` inside the fire's own
transaction, with a ``succeeded`` result naming the topic and partition: a
read_committed consumer of the topic sees each occurrence's record exactly once,
with no worker in the path. ``value`` is any JSON (written as its JSON bytes) or
``{"base64": "..."}`` for raw bytes; ``key`` is text or null (null: the partition
is chosen from the run id, so an occurrence always lands on the same one).
Headers `RUN_ID_HEADER`, `SCHEDULED_AT_HEADER`, `ATTEMPT_HEADER` and
`IDEMPOTENCY_KEY_HEADER` are always added. The topic must be allowed for the
namespace (`TargetTopics`); the shard refuses the upsert otherwise.

**http**: run by a worker as the built-in job `HTTP_JOB` (`kafkron worker` serves
it with no job module); every attempt carries ``Idempotency-Key``, the run's key.
Secrets are named, never written: a header value ``{"secret": NAME}`` is resolved
by the worker when it sends.

The carrier. A decoded target is a `Job` whose name is `KAFKA_JOB` or `HTTP_JOB`
and whose args are the target's normalised fields, so the changelog, the restore,
the DLQ records and every view handle a target as the job they already know, and
a dead letter names the target (its ``job.args`` hold the topic or the URL). Job
names starting ``kafkron.`` are reserved: a ``job`` naming one is refused.

Placeholders (one rule for key, value strings and header values): ``{name}`` is
replaced by the run's `PLACEHOLDERS` value; ``{{`` and ``}}`` are a literal brace.
Any other brace is refused at upsert, naming the field. Object keys and base64
values are never rendered.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from topics.command_fields import FieldError, check_keys, clip, describe, integer, obj, string
from topics.names import TopicKind
from topics.priority import is_lane, queue_of_lane
from topics.queues import DEFAULT_QUEUE, QUEUE_TOPIC_INFIX
from topics.target_patterns import allowed, refusal_of
from topics.templates import render_json, template_names

KAFKA_JOB = "kafkron.kafka"
HTTP_JOB = "kafkron.http"
RESERVED_JOB_PREFIX = "kafkron."

RUN_ID_HEADER = "kafkron-run-id"
SCHEDULE_ID_HEADER = "kafkron-schedule-id"
SCHEDULED_AT_HEADER = "kafkron-scheduled-at"
ATTEMPT_HEADER = "kafkron-attempt"
IDEMPOTENCY_KEY_HEADER = "kafkron-idempotency-key"

PLACEHOLDERS: Mapping[str, str] = {
    "run_id": "the run id, {schedule_id}@{scheduled_at}",
    "schedule_id": "the schedule id",
    "scheduled_at": "the occurrence, RFC 3339 UTC with milliseconds",
    "fired_at": "when the shard fired it",
    "attempt": "the attempt number (1 for a Kafka target)",
    "idempotency_key": "the run's idempotency key (64 hex), the same on every attempt",
    "logical_date": "Airflow's logical date: the start of the data interval",
    "data_interval_start": "the previous occurrence (the occurrence itself if none)",
    "data_interval_end": "the occurrence",
}
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
MAX_HTTP_TIMEOUT_S = 300
DEFAULT_HTTP_TIMEOUT_S = 10
MAX_HEADERS = 32
# Kafka topic names: 1-249 of these characters, not "." or "..".
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
_EXAMPLE_KAFKA = '{"kafka": {"topic": "orders.due", "value": {"order": "o-1"}}}'
_EXAMPLE_HTTP = '{"http": {"url": "https://example.com/hook", "method": "POST"}}'


def target_job(value: Any, path: str = "target") -> tuple[str, dict[str, Any]]:
    """(carrier job name, normalised args) of a command's ``target``; `FieldError` naming
    the field otherwise."""
    body = obj(value, path, _EXAMPLE_KAFKA)
    kinds = [k for k in ("kafka", "http") if k in body]
    check_keys(body, path, ("kafka", "http"))
    if len(kinds) != 1:
        raise FieldError(
            f"{path}: say exactly one of kafka or http, as {_EXAMPLE_KAFKA} or {_EXAMPLE_HTTP}"
        )
    if kinds[0] == "kafka":
        return KAFKA_JOB, _kafka_args(body["kafka"], f"{path}.kafka")
    return HTTP_JOB, _http_args(body["http"], f"{path}.http")


def _kafka_args(value: Any, path: str) -> dict[str, Any]:
    spec = obj(value, path, _EXAMPLE_KAFKA)
    check_keys(spec, path, ("topic", "key", "value", "headers"))
    topic = string(spec.get("topic"), f"{path}.topic", max_chars=249)
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise FieldError(
            f"{path}.topic: {describe(topic)} is not a Kafka topic name"
            " (letters, digits, '.', '_' and '-')"
        )
    key = spec.get("key")
    if key is not None:
        key = string(key, f"{path}.key", max_chars=1000, allow_empty=True)
        check_template(key, f"{path}.key")
    raw = spec.get("value")
    if isinstance(raw, dict) and set(raw) == {"base64"}:
        try:
            base64.b64decode(string(raw["base64"], f"{path}.value.base64"), validate=True)
        except (binascii.Error, ValueError):
            raise FieldError(f"{path}.value.base64: not valid base64") from None
    else:
        _check_strings(raw, f"{path}.value")
    return {
        "topic": topic,
        "key": key,
        "value": raw,
        "headers": _headers(spec.get("headers"), f"{path}.headers", secrets=False),
    }


def _http_args(value: Any, path: str) -> dict[str, Any]:
    spec = obj(value, path, _EXAMPLE_HTTP)
    check_keys(spec, path, ("url", "method", "headers", "body", "timeout_s"))
    url = string(spec.get("url"), f"{path}.url", max_chars=2000)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FieldError(f"{path}.url: {describe(url)} is not an http:// or https:// URL")
    check_template(url, f"{path}.url")
    method = spec.get("method")
    method = "POST" if method is None else string(method, f"{path}.method", max_chars=10)
    if method.upper() not in HTTP_METHODS:
        raise FieldError(f"{path}.method: {describe(method)}; one of {', '.join(HTTP_METHODS)}")
    body = spec.get("body")
    _check_strings(body, f"{path}.body")
    timeout = spec.get("timeout_s")
    return {
        "url": url,
        "method": method.upper(),
        "headers": _headers(spec.get("headers"), f"{path}.headers", secrets=True),
        "body": body,
        "timeout_s": DEFAULT_HTTP_TIMEOUT_S
        if timeout is None
        else integer(timeout, f"{path}.timeout_s", low=1, high=MAX_HTTP_TIMEOUT_S, unit="s"),
    }


def _headers(value: Any, path: str, *, secrets: bool) -> dict[str, Any]:
    if value is None:
        return {}
    headers = obj(value, path, '{"source": "kafkron"}')
    if len(headers) > MAX_HEADERS:
        raise FieldError(f"{path}: {len(headers)} headers; at most {MAX_HEADERS}")
    out: dict[str, Any] = {}
    for name, text in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise FieldError(f"{path}: {describe(name)} is not a header name")
        if name.lower().startswith("kafkron-"):
            raise FieldError(f"{path}.{name}: headers starting kafkron- are kafkron's own")
        if secrets and isinstance(text, dict):
            check_keys(text, f"{path}.{name}", ("secret",))
            out[name] = {"secret": string(text.get("secret"), f"{path}.{name}.secret")}
            continue
        out[name] = string(text, f"{path}.{name}", max_chars=4000, allow_empty=True)
        check_template(out[name], f"{path}.{name}")
    return out


def _check_strings(value: Any, path: str) -> None:
    """Every string inside a JSON value is a valid template."""
    if isinstance(value, str):
        check_template(value, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_strings(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_strings(item, f"{path}.{name}")


def check_template(text: str, path: str) -> None:
    """`FieldError` unless every brace in ``text`` is a known placeholder or doubled."""
    for token, name in template_names(text):
        if name is None or name not in PLACEHOLDERS:
            raise FieldError(
                f"{path}: {clip(token)} in {describe(text)} is no placeholder; known:"
                f" {', '.join('{' + n + '}' for n in PLACEHOLDERS)}; write {{{{ or }}}}"
                " for a literal brace"
            )


def _has_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return "{" in value or "}" in value
    if isinstance(value, list):
        return any(_has_placeholder(item) for item in value)
    if isinstance(value, dict):
        return any(_has_placeholder(item) for item in value.values())
    return False


@dataclass(frozen=True, slots=True)
class KafkaDelivery:
    """A Kafka target's args made ready to render once per fire (shared by a definition)."""

    topic: str
    key: str | None
    value: Any
    headers: tuple[tuple[str, str], ...]
    constant_value: bytes | None
    """The value's bytes when no string in it has a placeholder (most targets)."""
    uses_interval: bool
    """Whether a template names the logical date or the data interval (computed per
    fire only then: it walks the spec back)."""

    @classmethod
    def of(cls, args: Mapping[str, Any]) -> KafkaDelivery:
        value = args.get("value")
        constant: bytes | None = None
        if isinstance(value, dict) and set(value) == {"base64"}:
            constant = base64.b64decode(value["base64"])
        elif not _has_placeholder(value):
            constant = orjson.dumps(value)
        headers = tuple((str(k), str(v)) for k, v in (args.get("headers") or {}).items())
        texts = [args.get("key") or "", *(v for _, v in headers), orjson.dumps(value).decode()]
        interval = ("logical_date", "data_interval_start", "data_interval_end")
        return cls(
            topic=str(args["topic"]),
            key=args.get("key"),
            value=value,
            headers=headers,
            constant_value=constant,
            uses_interval=any("{" + n + "}" in t for t in texts for n in interval),
        )

    def value_bytes(self, values: Callable[[str], str]) -> bytes:
        if self.constant_value is not None:
            return self.constant_value
        return orjson.dumps(render_json(self.value, values))


@dataclass(frozen=True, slots=True)
class TargetTopic:
    """What the shard knows of one allowed target topic (from the runtime)."""

    partitions: int
    max_message_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class TargetTopics:
    """The namespace's allowed target topics and what the runtime last learnt of them.

    ``allowed``: patterns, each a literal topic name or a prefix ending in ``*``
    (the two pattern kinds Kafka's ACLs have, so `topics.acl_plan` grants exactly
    them). ``known``: partitions and size limit of allowed topics that exist.
    ``refused``: topic -> the broker's reason, for a topic whose records the broker
    refused inside a transaction; the shard fails occurrences naming it, visibly,
    instead of failing every turn (the runtime forgets the entry after a while).
    """

    allowed: tuple[str, ...] = ()
    known: Mapping[str, TargetTopic] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    own_prefix: str = ""
    refused_until_ms: Mapping[str, int] = field(default_factory=dict)
    """Topic -> the instant (epoch ms) its refusal mark ends, where the runtime knows it."""
    refresh_ms: int = 0
    """How long until the runtime next reads the topics (a topic created now is
    ``known`` only then)."""
    """The namespace's own ``{ns}.`` topics are never a target (a confused deputy)."""
    _verdicts: dict[str, TargetTopic | str] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`writable`'s answers: a snapshot never changes, and it is asked at every fire."""

    def allows(self, topic: str) -> bool:
        return allowed(topic, self.allowed, self.own_prefix)

    def writable(self, topic: str) -> TargetTopic | str:
        """What the shard knows of ``topic`` if it may write to it now, else why not."""
        verdict = self._verdicts.get(topic)
        if verdict is None:
            why = self.why_not(topic)
            verdict = self._verdicts[topic] = self.known[topic] if why is None else why
        return verdict

    def why_not(self, topic: str) -> str | None:
        """None if the shard may write to ``topic`` now, else the reason it may not."""
        if not self.allows(topic):
            return refusal_of(topic, self.allowed, self.own_prefix)
        refused = self.refused.get(topic)
        if refused is not None:
            return f"target topic {topic} refused the last record written to it: {refused}"
        if topic not in self.known:
            return (
                f"target topic {topic} does not exist (or this scheduler may not describe"
                " it); create it, or grant the scheduler's principal Describe and Write on it"
            )
        return None

    def queue_topic(self, queue: str) -> str:
        """The topic of a queue's runs: ``{ns}.runs.Q`` (`topics.queues`), ``{ns}.runs``
        for the default queue (written by partition only for a concurrency key's runs,
        docs/DESIGN.md §8.2)."""
        if queue == DEFAULT_QUEUE:
            return f"{self.own_prefix}runs"
        return f"{self.own_prefix}{QUEUE_TOPIC_INFIX}{queue}"

    def queue_why_not(self, topic: str) -> str | None:
        """None if the shard may write runs to queue topic ``topic`` now, else why not.

        A queue's topic is one of the namespace's own (never an allowed *target*), but
        it is created per queue by an operator, so the shard learns of it as of a
        target topic: the runtime lists ``{ns}.runs.*`` into ``known`` and marks one
        whose batch the broker refused in ``refused`` (docs/DESIGN.md §8.1).
        """
        refused = self.refused.get(topic)
        if refused is not None:
            return f"queue topic {topic} refused the last record written to it: {refused}"
        if topic not in self.known:
            placement = topic[len(self.own_prefix) + len(QUEUE_TOPIC_INFIX) :]
            if is_lane(placement):  # a high lane (docs/DESIGN.md §8.4)
                queue = queue_of_lane(placement)
                flags = "--lanes" if queue == DEFAULT_QUEUE else f"--lanes --queue {queue}"
                return (
                    f"high lane topic {topic} does not exist (or this scheduler may not"
                    f" describe it); create it (kafkron topics create {flags}) and grant"
                    f" the schedulers Describe and Write on it (kafkron acl plan {flags})"
                )
            return (
                f"queue topic {topic} does not exist (or this scheduler may not describe"
                f" it); create it (kafkron topics create --queue"
                f" {placement}) and grant the"
                " schedulers Describe and Write on it (kafkron acl plan --queue)"
            )
        return None

    def ratelimits_why_not(self) -> str | None:
        """None if the shard may write a rate-limit pause or resume to ``{ns}.ratelimits``
        now, else why not: learnt as a queue topic is (docs/DESIGN.md §8.5)."""
        topic = f"{self.own_prefix}{TopicKind.RATELIMITS.value}"
        refused = self.refused.get(topic)
        if refused is not None:
            return (
                f"rate-limit pauses topic {topic} refused the last record written to it:"
                f" {refused}; grant the schedulers Write on it (kafkron acl plan --role"
                " scheduler), or create it again (kafkron topics create), then send the"
                " command again"
            )
        if topic not in self.known:
            return (
                f"rate-limit pauses topic {topic} does not exist (or this scheduler may not"
                " describe it); create it (kafkron topics create) and grant the schedulers"
                " Describe and Write on it (kafkron acl plan --role scheduler), then send"
                " the command again"
            )
        return None

    def queue_retry_floor_ms(self, topic: str, now_ms: int) -> int:
        """How long an attempt that queue topic ``topic`` could not take waits at least
        before the next: until its refusal mark ends (`REFUSED_UNTIL_UNKNOWN_MS` if the
        end is not known), or, for a missing topic, until the runtime next reads the
        topics; retrying sooner meets the same answer and spends an attempt for nothing.
        """
        if topic in self.refused:
            until_ms = self.refused_until_ms.get(topic)
            if until_ms is None:
                return REFUSED_UNTIL_UNKNOWN_MS
            # Past its end, the mark is still here only because this view predates the
            # runtime's next (handed when a mark ends): wait for that view, not 0 ms.
            return max(MARK_HANDOVER_MS, until_ms - now_ms)
        if topic not in self.known:
            return self.refresh_ms
        return 0  # too small for the record: only an operator's change helps, any time


# A refusal mark whose end the runtime did not state lasts at least this long: the
# scheduler's first mark (`actors.scheduler.target_table.REFUSED_FIRST_S`).
REFUSED_UNTIL_UNKNOWN_MS = 60_000

# The least wait after a refused attempt whose mark should have ended: the runtime
# hands its cores a new view as a mark ends, at its loop's next wake (at most a second
# away, `actors.scheduler.lifecycle.MAX_SLEEP_MS`); a retry at 0 ms would meet the
# stale mark and spend an attempt for nothing.
MARK_HANDOVER_MS = 2_000
