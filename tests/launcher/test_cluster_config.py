"""The cluster's pure parts: node layout and KRaft settings, topic guarantees, client settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.broker import BrokerError
from actors.broker.cluster import ClusterLayout, read_manifest
from actors.broker.config import server_properties
from topics import clients, guarantees
from topics.guarantees import MIN_MAX_MESSAGE_BYTES, findings
from topics.names import Settings, TopicKind


def _props(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


# ---- the launcher's layout and configuration -------------------------------------------------


def test_nodes_get_port_pairs_and_dirs_of_their_own(tmp_path: Path) -> None:
    layout = ClusterLayout(port=19100, data_dir=tmp_path, nodes=3)
    assert [(n.port, n.controller_port) for n in layout.node_layouts] == [
        (19100, 19101),
        (19102, 19103),
        (19104, 19105),
    ]
    assert [n.data_dir for n in layout.node_layouts] == [tmp_path / f"node-{i}" for i in (1, 2, 3)]
    assert layout.bootstrap == "127.0.0.1:19100,127.0.0.1:19102,127.0.0.1:19104"


def test_a_single_node_keeps_the_data_dir_itself(tmp_path: Path) -> None:
    node = ClusterLayout(port=19092, data_dir=tmp_path, nodes=1).node(1)
    assert (node.port, node.data_dir) == (19092, tmp_path)


def test_three_voters_and_replicated_internal_topics(tmp_path: Path) -> None:
    layout = ClusterLayout(port=19100, data_dir=tmp_path, nodes=3)
    props = _props(server_properties(layout.node(2), 2, layout.node_layouts))
    assert props["node.id"] == "2"
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == (
        "1@127.0.0.1:19101,2@127.0.0.1:19103,3@127.0.0.1:19105"
    )
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19102,CONTROLLER://127.0.0.1:19103"
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
        "default.replication.factor",
    ):
        assert props[key] == "3", key
    for key in (
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.min.isr",
        "min.insync.replicas",
    ):
        assert props[key] == "2", key
    assert props["unclean.leader.election.enable"] == "false"


def test_node_numbers_and_counts_are_checked(tmp_path: Path) -> None:
    layout = ClusterLayout(port=19100, data_dir=tmp_path, nodes=3)
    with pytest.raises(BrokerError, match="between 1 and 3"):
        layout.node(4)
    with pytest.raises(BrokerError, match="--nodes must be between 1 and 9"):
        ClusterLayout.resolve(port=19100, data_dir=tmp_path, nodes=0)


def test_the_manifest_decides_the_node_count_and_refuses_another(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text('{"nodes": 3, "port": 19100, "cluster_id": "x"}')
    assert read_manifest(tmp_path) == {"nodes": 3, "port": 19100, "cluster_id": "x"}
    assert ClusterLayout.resolve(port=19100, data_dir=tmp_path).nodes == 3
    with pytest.raises(BrokerError, match="holds a 3-node cluster, not 1"):
        ClusterLayout.resolve(port=19100, data_dir=tmp_path, nodes=1)
    with pytest.raises(BrokerError, match="pass --port 19100"):
        ClusterLayout.resolve(port=19200, data_dir=tmp_path)


def test_a_single_node_data_dir_is_not_turned_into_a_cluster(tmp_path: Path) -> None:
    (tmp_path / "kraft").mkdir()
    (tmp_path / "kraft" / "meta.properties").write_text("node.id=1\n")
    with pytest.raises(BrokerError, match="holds a single-node broker"):
        ClusterLayout.resolve(port=19100, data_dir=tmp_path, nodes=3)


# ---- the guarantees of the topics ---------------------------------------------------------


def _healthy(settings: Settings, rf: int) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    replicas = {settings.topic(kind): rf for kind in TopicKind}
    configs = {settings.topic(kind): guarantees.topic_configs_for(rf) for kind in TopicKind}
    configs[settings.topic(TopicKind.RUNS)]["message.timestamp.type"] = "LogAppendTime"
    return replicas, configs


@pytest.mark.parametrize(("brokers", "rf"), [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_what_kafkron_creates_meets_its_own_check(brokers: int, rf: int) -> None:
    settings = Settings(namespace="ns")
    assert guarantees.replication_factor_for(brokers) == rf
    replicas, configs = _healthy(settings, rf)
    assert findings(settings, replicas, configs, brokers) == []


def test_min_insync_1_with_three_replicas_breaks_exactly_once() -> None:
    settings = Settings(namespace="ns")
    replicas, configs = _healthy(settings, 3)
    configs["ns.schedules"]["min.insync.replicas"] = "1"
    (found,) = findings(settings, replicas, configs, 3)
    assert found.breaks and found.topic == "ns.schedules"
    assert "min.insync.replicas is 1 with 3 replicas" in found.text


@pytest.mark.parametrize(
    ("topic", "key", "value", "fragment"),
    [
        ("ns.results", "unclean.leader.election.enable", "true", "unclean.leader.election"),
        ("ns.runs", "message.timestamp.type", "CreateTime", "expected LogAppendTime"),
        ("ns.schedules", "max.message.bytes", "65536", f"below the {MIN_MAX_MESSAGE_BYTES}"),
        ("ns.dlq", "min.insync.replicas", "4", "no write can be acknowledged"),
    ],
)
def test_each_broken_guarantee_is_named(topic: str, key: str, value: str, fragment: str) -> None:
    settings = Settings(namespace="ns")
    replicas, configs = _healthy(settings, 3)
    configs[topic][key] = value
    (found,) = findings(settings, replicas, configs, 3)
    assert found.breaks and found.topic == topic and fragment in found.text


def test_rf_1_on_a_cluster_only_weakens() -> None:
    settings = Settings(namespace="ns")
    replicas, configs = _healthy(settings, 1)
    found = findings(settings, replicas, configs, 3)
    assert len(found) == len(TopicKind)
    assert not any(f.breaks for f in found)
    assert "replication factor 1 on a cluster of 3 brokers (expected 3)" in found[0].text


def test_a_small_runs_topic_only_weakens() -> None:
    settings = Settings(namespace="ns")
    replicas, configs = _healthy(settings, 3)
    configs["ns.runs"]["max.message.bytes"] = "4096"
    (found,) = findings(settings, replicas, configs, 3)
    assert not found.breaks and "end failed (NonRetryable)" in found.text


def test_min_insync_equal_to_rf_only_weakens() -> None:
    settings = Settings(namespace="ns")
    replicas, configs = _healthy(settings, 3)
    configs["ns.runs"]["min.insync.replicas"] = "3"
    (found,) = findings(settings, replicas, configs, 3)
    assert not found.breaks and "one broker down stops every write" in found.text


def test_the_largest_record_fits_what_kafkron_sets() -> None:
    from actors.shard.core import CHANGELOG_MAX_BYTES
    from topics.commands import MAX_COMMAND_BYTES

    # The check's bound is the shard's real changelog bound, above any command.
    assert guarantees.LARGEST_RECORD_BYTES == CHANGELOG_MAX_BYTES
    assert MAX_COMMAND_BYTES * 4 // 3 < guarantees.LARGEST_RECORD_BYTES  # base64 in rejected
    assert guarantees.MAX_MESSAGE_BYTES >= MIN_MAX_MESSAGE_BYTES


# ---- client settings ------------------------------------------------------------------------


def test_every_producer_waits_for_all_in_sync_replicas_and_is_idempotent() -> None:
    settings = Settings(namespace="ns", bootstrap="a:1,b:2")
    plain = clients.producer_kwargs(settings, "cli")
    txn = clients.transactional_producer_kwargs(settings, "shard", "ns-shard-0", linger_ms=0)
    for kwargs in (plain, txn):
        assert kwargs["bootstrap_servers"] == "a:1,b:2"
        assert kwargs["acks"] == "all" and kwargs["enable_idempotence"] is True
        assert kwargs["request_timeout_ms"] < clients.TRANSACTION_TIMEOUT_MS
    assert txn["transactional_id"] == "ns-shard-0" and txn["linger_ms"] == 0


def test_consumers_read_committed_and_never_auto_commit() -> None:
    kwargs = clients.consumer_kwargs(Settings(), "w", "g", session_timeout_ms=6000)
    assert kwargs["isolation_level"] == "read_committed"
    assert kwargs["enable_auto_commit"] is False
    assert (kwargs["group_id"], kwargs["session_timeout_ms"]) == ("g", 6000)


def test_a_call_site_cannot_override_a_cluster_setting() -> None:
    with pytest.raises(TypeError, match="acks"):
        clients.producer_kwargs(Settings(), "cli", acks=1)
    with pytest.raises(TypeError, match="isolation_level"):
        clients.consumer_kwargs(Settings(), "c", isolation_level="read_uncommitted")
