"""The local broker's configuration and its one-line errors, without starting Kafka."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from actors.broker import BrokerError, BrokerLayout, provision
from actors.broker.config import log4j2_properties, server_properties
from actors.broker.process import _cluster_id


def _props(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_single_node_kraft_settings(tmp_path: Path) -> None:
    layout = BrokerLayout(port=19092, data_dir=tmp_path)
    props = _props(server_properties(layout))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["log.dirs"] == str(tmp_path / "kraft")
    # One node: internal topics must not ask for replicas that cannot exist.
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    ):
        assert props[key] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"


def test_log4j2_config_logs_to_the_console_at_info() -> None:
    props = {k.strip(): v.strip() for k, v in _props(log4j2_properties()).items()}
    assert props["appender.console.type"] == "Console"
    assert props["rootLogger.level"] == "info"


def test_layout_reads_port_and_dirs_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKRON_BROKER_PORT", "29092")
    monkeypatch.setenv("KAFKRON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KAFKRON_BROKER_DATA_DIR", raising=False)
    layout = BrokerLayout.resolve()
    assert layout.port == 29092
    assert layout.controller_port == 29093
    assert layout.bootstrap == "127.0.0.1:29092"
    assert layout.data_dir == (tmp_path / "cache" / "broker-29092").resolve()
    explicit = BrokerLayout.resolve(port=1234, data_dir=tmp_path / "d")
    assert (explicit.port, explicit.data_dir) == (1234, (tmp_path / "d").resolve())


def test_cluster_id_is_kafka_uuid_text() -> None:
    for _ in range(200):
        cluster_id = _cluster_id()
        assert len(cluster_id) == 22
        assert not cluster_id.startswith("-")
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def _fake_java(directory: Path, version_line: str) -> Path:
    """A `java` that only answers `-version`, as an old JDK would."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return directory


@pytest.mark.parametrize(
    ("version_line", "major"),
    [('openjdk version "11.0.22" 2024-01-16', 11), ('java version "1.8.0_392"', 8)],
)
def test_old_java_is_refused_with_advice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version_line: str, major: int
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, version_line)))
    with pytest.raises(BrokerError, match=f"Java {major}; Kafka 4 needs Java 17"):
        provision.find_java()


def test_current_java_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _fake_java(tmp_path, 'openjdk version "21.0.2" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert provision.find_java() == str(home / "bin" / "java")


def test_missing_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError, match="java not found: install Java 17"):
        provision.find_java()


def test_missing_mvn_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKRON_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError, match="mvn not found: install Apache Maven"):
        provision.ensure_jars()
    assert not provision.jars_dir().exists()


def test_pom_is_shipped_with_the_package() -> None:
    pom = provision.pom_path().read_text()
    assert "<artifactId>kafka_2.13</artifactId>" in pom
    assert "<artifactId>log4j-slf4j-impl</artifactId>" in pom
    assert os.path.basename(provision.jars_dir()).startswith("jars-")
