"""Consuming kafkron's topics from Faust agents (the optional extra ``kafkron[faust]``).

The firing path does not use Faust; the consuming side is where it fits: alert on
dead letters, count failures in windowed tables, replay when the upstream is back.
This package gives such an app what kafkron's topics require:

- `kafkron_app`: a ``faust.App`` whose consumer reads ``read_committed`` (results of
  aborted transactions never reach an agent) with Faust's at-least-once processing.
- `declare_topics`: the namespace's topics, keys and values typed with the Faust
  models of `actors.faust.records`, decoded through the codec's own parsers; a
  record that fails is logged, counted in `undecodable_records` and skipped, and
  the agent goes on (`actors.faust.undecodable`).
- `send_command` (and `dlq_replay`, `schedule_trigger`, ...): commands validated by
  the shard's decoder before they are produced, as the command line does.

``actors/examples/faust_alerts.py`` puts them together.
"""

from __future__ import annotations

try:
    import faust  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError("actors.faust needs Faust: pip install 'kafkron[faust]'") from error

from actors.faust.app import NamespaceTopics, broker_urls, declare_topics, kafkron_app
from actors.faust.commands import (
    dlq_replay,
    ratelimit_pause,
    ratelimit_resume,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
    send_command,
    validated,
)
from actors.faust.records import (
    AlertRecord,
    CalendarDaysRecord,
    CalendarRecord,
    DeadLetterRecord,
    ErrorRecord,
    IntervalRecord,
    JobRecord,
    RateLimitRecord,
    RejectedRecord,
    ResultRecord,
    RunCancelRecord,
    RunRecord,
)
from actors.faust.undecodable import SkippingTopic, UndecodableRecords, undecodable_records

__all__ = [
    "AlertRecord",
    "CalendarDaysRecord",
    "CalendarRecord",
    "DeadLetterRecord",
    "ErrorRecord",
    "IntervalRecord",
    "JobRecord",
    "NamespaceTopics",
    "RateLimitRecord",
    "RejectedRecord",
    "ResultRecord",
    "RunCancelRecord",
    "RunRecord",
    "SkippingTopic",
    "UndecodableRecords",
    "broker_urls",
    "declare_topics",
    "dlq_replay",
    "kafkron_app",
    "ratelimit_pause",
    "ratelimit_resume",
    "schedule_pause",
    "schedule_resume",
    "schedule_trigger",
    "send_command",
    "undecodable_records",
    "validated",
]
