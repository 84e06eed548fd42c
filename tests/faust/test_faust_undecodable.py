"""The decode hooks of `SkippingTopic`: they report a record once and never raise.

Faust calls a topic's hook once per channel subscribed to the record's topic (every
agent's stream is a clone of the topic), with the same message object; a record read
again after a rebalance comes as a new message. The real-broker test
(tests/broker/faust/test_faust_bad_records.py) shows the agents never restart; this
one pins the counting rules without a broker.
"""

from __future__ import annotations

import logging

import pytest
from faust.exceptions import KeyDecodeError, ValueDecodeError
from faust.types import Message

from actors.faust import SkippingTopic, UndecodableRecords, declare_topics, kafkron_app
from actors.faust.undecodable import undecodable_records
from actors.observe import metrics
from topics.names import Settings, TopicKind


def _message(topic: str, offset: int) -> Message:
    return Message(topic, 2, offset, 0.0, 0, None, b"pay", b"\x00not json", None)


def test_every_topic_declared_skips_what_does_not_decode() -> None:
    settings = Settings(namespace="undecodable", bootstrap="127.0.0.1:1")
    app = kafkron_app("undecodable-app", settings, partitions=3)
    topics = declare_topics(app, settings)
    for topic in (topics.runs, topics.results, topics.dlq, topics.rejected, topics.commands):
        assert isinstance(topic, SkippingTopic)
        # What an agent or a stream on it reads: Faust clones the topic with its class.
        assert isinstance(topic.clone(is_iterator=True), SkippingTopic)


async def test_a_record_is_reported_once_however_many_channels_read_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(namespace="undecodable-once", bootstrap="127.0.0.1:1")
    app = kafkron_app("undecodable-once-app", settings, partitions=3)
    results = declare_topics(app, settings).results
    topic = settings.topic(TopicKind.RESULTS)
    channels = [results.clone(is_iterator=True) for _ in range(2)]
    before = undecodable_records.count(topic)
    before_metric = metrics.REGISTRY.get_sample_value(
        "kafkron_faust_records_undecodable_total", {"topic": topic}
    )
    caplog.set_level(logging.WARNING, logger="kafkron.faust")

    bad_value = _message(topic, 17)
    for channel in channels:  # as the conductor does: each channel, the same message
        await channel.on_value_decode_error(ValueDecodeError("result.worker: missing"), bad_value)
    bad_key = _message(topic, 18)
    for channel in channels:
        await channel.on_key_decode_error(KeyDecodeError("not UTF-8"), bad_key)
    redelivered = _message(topic, 17)  # after a rebalance: a new delivery
    await channels[0].on_value_decode_error(ValueDecodeError("result.worker: missing"), redelivered)

    assert undecodable_records.count(topic) == before + 3
    assert (
        metrics.REGISTRY.get_sample_value(
            "kafkron_faust_records_undecodable_total", {"topic": topic}
        )
        == (before_metric or 0) + 3
    )
    assert [r.getMessage() for r in caplog.records if r.name == "kafkron.faust"] == [
        f"skipping undecodable record {topic}[2]@17 (value): result.worker: missing",
        f"skipping undecodable record {topic}[2]@18 (key): not UTF-8",
        f"skipping undecodable record {topic}[2]@17 (value): result.worker: missing",
    ]


def test_the_tally_counts_per_topic() -> None:
    tally = UndecodableRecords()
    tally.report("value", ValueError("a"), _message("ns.results", 1))
    tally.report("value", ValueError("b"), _message("ns.results", 2))
    tally.report("value", ValueError("c"), _message("ns.dlq", 1))
    assert tally.count("ns.results") == 2
    assert tally.count("ns.runs") == 0
    assert tally.count() == 3
    assert tally.by_topic() == {"ns.results": 2, "ns.dlq": 1}
