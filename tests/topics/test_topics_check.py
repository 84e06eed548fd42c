"""The rules of `topics check` on described state: every mismatch with the contract is
named (no Kafka; the real broker's side is tests/broker/topics/test_topics_admin.py)."""

from __future__ import annotations

import asyncio

import pytest

from topics.admin import (
    DLQ_RETENTION_MS,
    TOPIC_SPECS,
    _majority,
    _problems,
    create_topics,
)
from topics.names import CALENDARS_PARTITIONS, Settings, TopicKind
from topics.segments import SCHEDULES_SEGMENT_BYTES, slow_restore


def _contract_state(
    settings: Settings, partitions: int = 3
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    counts = {settings.topic(kind): partitions for kind in TopicKind}
    counts[settings.topic(TopicKind.CALENDARS)] = CALENDARS_PARTITIONS  # one, always
    counts[settings.topic(TopicKind.RATELIMITS)] = CALENDARS_PARTITIONS  # one, always
    configs = {
        settings.topic(kind): {
            "cleanup.policy": spec.cleanup_policy,
            "retention.ms": spec.configs.get("retention.ms", "604800000"),
        }
        for kind, spec in TOPIC_SPECS.items()
    }
    return counts, configs


def test_contract_state_has_no_problems() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    assert _problems(settings, counts, configs, None) == []
    assert _problems(settings, counts, configs, 3) == []


def test_every_kind_has_a_spec_and_the_changelog_calendars_and_pauses_are_compacted() -> None:
    assert set(TOPIC_SPECS) == set(TopicKind)
    compacted = [k for k, spec in TOPIC_SPECS.items() if spec.cleanup_policy == "compact"]
    assert compacted == [TopicKind.SCHEDULES, TopicKind.CALENDARS, TopicKind.RATELIMITS]


def test_a_ratelimits_topic_of_more_than_one_partition_is_named() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    counts["ns.ratelimits"] = 2
    assert _problems(settings, counts, configs, None) == [
        "ns.ratelimits: 2 partitions, expected 1 (every worker reads the rate-limit pauses"
        " in one order); recreate it"
    ]


def test_a_calendars_topic_of_more_than_one_partition_is_named() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    counts["ns.calendars"] = 3
    assert _problems(settings, counts, configs, None) == [
        "ns.calendars: 3 partitions, expected 1 (every scheduler reads the calendars in"
        " one order); recreate it"
    ]


@pytest.mark.parametrize(
    ("mutate", "expected_fragment"),
    [
        (lambda c, f: c.pop("ns.runs"), "ns.runs: missing"),
        (lambda c, f: c.__setitem__("ns.results", 4), "ns.results: 4 partitions, expected 3"),
        (lambda c, f: c.__setitem__("ns.commands", 1), "ns.commands: 1 partitions, expected 3"),
        (
            lambda c, f: f["ns.schedules"].__setitem__("cleanup.policy", "delete"),
            "ns.schedules: cleanup.policy is delete, expected compact",
        ),
        (
            lambda c, f: f["ns.commands"].__setitem__("cleanup.policy", "compact"),
            "ns.commands: cleanup.policy is compact, expected delete",
        ),
        (
            lambda c, f: f["ns.dlq"].__setitem__("retention.ms", "3600000"),
            "ns.dlq: retention.ms is 3600000, expected at least",
        ),
    ],
)
def test_each_mismatch_is_named(mutate: object, expected_fragment: str) -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    mutate(counts, configs)  # type: ignore[operator]
    problems = _problems(settings, counts, configs, None)
    assert len(problems) == 1, problems
    assert expected_fragment in problems[0]


def test_infinite_or_longer_dlq_retention_is_fine() -> None:
    settings = Settings(namespace="ns")
    for retention in ("-1", str(DLQ_RETENTION_MS * 2)):
        counts, configs = _contract_state(settings)
        configs["ns.dlq"]["retention.ms"] = retention
        assert _problems(settings, counts, configs, None) == []


def test_explicit_expected_count_flags_all_sharded_topics() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings, partitions=3)
    problems = _problems(settings, counts, configs, 6)
    assert [p.split(":")[0] for p in problems] == ["ns.commands", "ns.schedules", "ns.results"]


def test_majority_names_the_odd_one_out() -> None:
    assert _majority([3, 3, 4]) == 3
    assert _majority([4, 3, 3]) == 3
    assert _majority([2, 5]) == 2  # a tie picks the smallest, deterministically
    assert _majority([]) is None


def test_partition_counts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(create_topics(Settings(namespace="ns"), partitions=0))


def test_schedules_segments_larger_than_the_cap_are_named_with_the_fix() -> None:
    settings = Settings(namespace="ns")
    name = settings.topic(TopicKind.SCHEDULES)
    assert TOPIC_SPECS[TopicKind.SCHEDULES].configs["segment.bytes"] == str(SCHEDULES_SEGMENT_BYTES)
    assert slow_restore(settings, {name: {"segment.bytes": str(SCHEDULES_SEGMENT_BYTES)}}) == []
    assert slow_restore(settings, {}) == []  # not readable: said elsewhere
    [finding] = slow_restore(settings, {name: {"segment.bytes": "1073741824"}})
    assert finding.startswith(f"{name}: segment.bytes is 1073741824")
    assert f"--add-config segment.bytes={SCHEDULES_SEGMENT_BYTES}" in finding
