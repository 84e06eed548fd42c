"""Faust codecs of kafkron's topics: the codec's strict parser first, then the model.

One codec per record kind. Reading, it runs `topics.messages`' parser for that kind
on the bytes (so ``"v"`` and every field are checked exactly as kafkron's own
readers check them, and a bad record fails with the field named), then hands Faust
the decoded object with only the fields the model declares: fields a newer kafkron
adds are dropped, not refused. Writing, it turns the model back into the JSON the
codec's builder would have written (optional fields the builder omits when empty
are omitted) and parses that too, so a Faust agent cannot put a malformed record
on a kafkron topic.

A record that fails to decode raises ``ValueError`` with the reason, which Faust's
decoder turns into ``ValueDecodeError``. Faust's own answer to that is to throw it
into every agent on the topic, which crashes and restarts them; the topics
`declare_topics` returns log it once, count it and skip it instead
(`actors.faust.undecodable`), and the agent never sees it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from faust.serializers import codecs

from actors.faust.records import (
    AlertRecord,
    CalendarRecord,
    DeadLetterRecord,
    RejectedRecord,
    ResultRecord,
    RunCancelRecord,
    RunRecord,
)
from topics import alerts, codec, messages
from topics.calendar_commands import decode_calendar_value


@dataclass(frozen=True, slots=True)
class WireShape:
    """How one record kind travels: its model, its strict parser, what may be omitted."""

    model: type[faust.Record]
    parse: Callable[[bytes], object]
    """The codec's parser of this kind; raises ``ValueError`` naming the bad field."""
    omitted_when_none: frozenset[str]
    """Fields the codec's builder leaves out rather than writing ``null`` (a dotted
    name is a field of a nested object: ``job.queue``)."""


RUN = WireShape(
    RunRecord,
    messages.parse_run,
    frozenset(
        {
            "task",
            "logical_date",
            "data_interval",
            "job.queue",
            "job.concurrency",
            "job.priority",
            "job.rate_limit",
            "report_start",
        }
    ),
)
RESULT = WireShape(
    ResultRecord,
    messages.parse_result,
    frozenset({"task", "error", "counts", "progress", "covers", "target"}),
)
RUN_CANCEL = WireShape(RunCancelRecord, messages.parse_cancel, frozenset({"task"}))
DEAD_LETTER = WireShape(
    DeadLetterRecord,
    messages.parse_dlq,
    frozenset({"task", "job.queue", "job.concurrency", "job.priority", "job.rate_limit"}),
)
REJECTED = WireShape(RejectedRecord, messages.parse_rejected, frozenset())
ALERT = WireShape(AlertRecord, alerts.parse_alert, frozenset())


def _parse_calendar(value: bytes) -> object:
    """The shard's own check of a ``{ns}.calendars`` record (the name is its key, which
    a value codec does not see: named generically in the error)."""
    return decode_calendar_value(value, "calendar")


CALENDAR = WireShape(
    CalendarRecord,
    _parse_calendar,
    frozenset({"calendar.tz", "calendar.dates", "calendar.ranges", "calendar.weekdays"}),
)


def model_fields(model: type[faust.Record]) -> dict[str, type[faust.Record] | None]:
    """Each field of ``model``, with the nested model it holds (or None for plain data)."""
    hints = typing.get_type_hints(model)
    fields: dict[str, type[faust.Record] | None] = {}
    for name in model._options.fields:
        hint = hints[name]
        candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, faust.Record)]
        fields[name] = nested[0] if nested else None
    return fields


def known_fields(model: type[faust.Record], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` restricted to the fields ``model`` declares, nested models included."""
    kept: dict[str, Any] = {}
    for name, nested in model_fields(model).items():
        if name not in data:
            continue
        value = data[name]
        kept[name] = known_fields(nested, value) if nested and isinstance(value, dict) else value
    return kept


def _plain(value: Any) -> Any:
    """Models (nested too) as JSON objects; everything else as it is."""
    if isinstance(value, faust.Record):
        return {name: _plain(item) for name, item in value.asdict().items()}
    if isinstance(value, dict):
        return {name: _plain(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


class KafkronCodec(codecs.Codec):
    """The Faust codec of one record kind (see the module docstring)."""

    def __init__(self, shape: WireShape) -> None:
        super().__init__()
        self.shape = shape

    def _loads(self, s: bytes) -> Any:
        self.shape.parse(s)  # raises ValueError naming the field; "v" is checked here
        return known_fields(self.shape.model, codec.loads(s))

    def _dumps(self, s: Any) -> bytes:
        plain = _plain(s)
        if not isinstance(plain, dict):
            raise ValueError(
                f"expected a {self.shape.model.__name__} or a JSON object, got {type(s).__name__}"
            )
        for name in self.shape.omitted_when_none:
            holder_name, _, leaf = name.rpartition(".")  # "job.queue": a nested field
            holder = plain.get(holder_name) if holder_name else plain
            if isinstance(holder, dict) and holder.get(leaf, "") is None:
                del holder[leaf]
        data = codec.dumps(plain)
        self.shape.parse(data)
        return data


class RunsCodec(KafkronCodec):
    """``{ns}.runs`` carries runs and cancel records: each is read with its own parser
    and model. A cancel comes out as a `RunCancelRecord` although the topic's value
    type is `RunRecord`: its decoded object names that model in Faust's blessed key,
    which Faust honours for a model that allows it."""

    def __init__(self) -> None:
        super().__init__(RUN)
        self.cancel = KafkronCodec(RUN_CANCEL)

    def _loads(self, s: bytes) -> Any:
        if not messages.is_cancel(s):
            return super()._loads(s)
        data = self.cancel._loads(s)
        data[BLESSED_KEY] = {"ns": RunCancelRecord._options.namespace}
        return data

    def _dumps(self, s: Any) -> bytes:
        # Faust hands a model over as its plain dict: a cancel is told by its "type".
        plain = _plain(s)
        if isinstance(plain, dict) and plain.get("type") == messages.CANCEL_TYPE:
            plain.pop(BLESSED_KEY, None)
            return self.cancel._dumps(plain)
        return super()._dumps(s)


# Where Faust looks for the name of the model a decoded object is (`faust.Record`).
BLESSED_KEY = "__faust"
run_codec = RunsCodec()
result_codec = KafkronCodec(RESULT)
dead_letter_codec = KafkronCodec(DEAD_LETTER)
rejected_codec = KafkronCodec(REJECTED)
alert_codec = KafkronCodec(ALERT)
calendar_codec = KafkronCodec(CALENDAR)
