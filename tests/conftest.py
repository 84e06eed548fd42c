"""Shared fixtures: a unique Kafka namespace per test, on the real local broker.

Tests that need Kafka take the `kafka_settings` fixture (or `make_kafka_settings`
for a custom partition count, or several namespaces) or carry
``@pytest.mark.broker``. Either way they are marked `broker`, so
``pytest -m "not broker"`` runs the pure tests alone, and they FAIL (never skip)
when no broker answers, with the command that starts one.

Each namespace is ``t-<8 hex>``: tests never see each other's records, and the
namespace's topics are deleted at teardown.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from actors.broker.probe import metadata_ok
from topics.admin import create_topics, delete_topics
from topics.names import Settings

DEFAULT_TEST_PARTITIONS = 3

# Property tests check correctness, never speed: on a loaded two-core machine input
# generation and single examples run slowly, and Hypothesis' speed checks would then
# fail a test whose every example passed.
hypothesis_settings.register_profile(
    "kafkron", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("kafkron")

# tests/slow/ runs only when named (`pytest -q tests/slow`): each of its tests costs minutes
# of CPU, and neither tests/run.sh nor .ci/run runs it. A path given on the command line
# is collected even when it is listed here.
collect_ignore = ["slow"]

# The Faust tests need the faust extra, which cannot share an environment with the other
# tests (its mode-streaming pins croniter<6, whose DST mistakes the oracle tests catch);
# CI runs them in an environment of their own (.ci/run). Elsewhere they are not collected.
# The extra is looked up as installed, not as importable: tests/faust/ is a package of
# that name too, importable as `faust` wherever tests/ itself is on the path.
try:
    importlib.metadata.version("faust-streaming")
except importlib.metadata.PackageNotFoundError:
    collect_ignore += ["faust", "broker/faust"]
_KAFKA_FIXTURES = frozenset({"kafka_settings", "make_kafka_settings"})
_broker_seen_up = False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_partitions(n, runs=None): partition count of the kafka_settings fixture",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)
    # The cluster group (tests/broker/cluster/) runs last: it starts a three-node cluster
    # and takes minutes. The sort is stable, so every other test keeps its place.
    items.sort(key=lambda item: item.get_closest_marker("cluster") is not None)


def _broker_down_message(bootstrap: str) -> str:
    return (
        f"no Kafka broker answers on {bootstrap}: run `kafkron broker start`"
        " (or set KAFKRON_BOOTSTRAP to a running broker), then rerun the tests"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a broker test at once, with advice, instead of hanging in a client.

    The cluster tests (marker ``cluster``) run on a three-node cluster of their own
    (tests/broker/cluster/conftest.py), after CI has stopped the single node: the
    single node's answer says nothing about them.
    """
    global _broker_seen_up
    if (
        _broker_seen_up
        or item.get_closest_marker("broker") is None
        or item.get_closest_marker("cluster") is not None
    ):
        return
    bootstrap = Settings.from_env().bootstrap
    if not asyncio.run(metadata_ok(bootstrap, timeout_s=10.0)):
        pytest.fail(_broker_down_message(bootstrap), pytrace=False)
    _broker_seen_up = True


def unique_namespace() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


MakeKafkaSettings = Callable[..., Awaitable[Settings]]


@pytest.fixture
async def make_kafka_settings() -> AsyncIterator[MakeKafkaSettings]:
    """Factory: ``await make_kafka_settings(partitions=4, runs_partitions=2)``.

    Each call creates a fresh namespace with all six topics; all are deleted at
    teardown.
    """
    made: list[Settings] = []

    async def make(
        partitions: int = DEFAULT_TEST_PARTITIONS, runs_partitions: int | None = None
    ) -> Settings:
        settings = Settings.from_env(namespace=unique_namespace())
        made.append(settings)
        await create_topics(settings, partitions=partitions, runs_partitions=runs_partitions)
        return settings

    yield make
    for settings in made:
        await delete_topics(settings)


@pytest.fixture
async def kafka_settings(
    request: pytest.FixtureRequest, make_kafka_settings: MakeKafkaSettings
) -> Settings:
    """Settings of a fresh namespace whose six topics exist with 3 partitions.

    ``@pytest.mark.kafka_partitions(6, runs=2)`` on the test changes the counts.
    """
    marker = request.node.get_closest_marker("kafka_partitions")
    partitions = DEFAULT_TEST_PARTITIONS
    runs_partitions: int | None = None
    if marker is not None:
        partitions = int(marker.args[0]) if marker.args else partitions
        runs = marker.kwargs.get("runs")
        runs_partitions = None if runs is None else int(runs)
    return await make_kafka_settings(partitions, runs_partitions)
