"""`kafkron broker start --nodes 3 --secure`: one CA, SCRAM users and ACLs on every node.

One secure three-node cluster (base port ``KAFKRON_SECURE_CLUSTER_TEST_PORT``, or a
free block of six): the admin creates the namespace's topics (three replicas each) and
a submitter; the submitter schedules, the same user with a wrong password is refused.
Replication between the nodes runs on their SASL_SSL inter-broker listener (and the
quorum on the mutual-TLS controller listener), so every replica in sync is the proof
that the brokers authenticated to each other.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from actors.broker import secure as broker_secure
from actors.broker.cluster import ClusterLayout
from tests.kit.cluster import NODES
from tests.kit.paths import REPO
from tests.kit.ports import free_port_block
from topics.admin import TOPIC_SPECS

pytestmark = [
    pytest.mark.broker,
    pytest.mark.cluster,
    pytest.mark.timeout(900),
    # aiokafka leaves a refused connection's socket to the garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

NAMESPACE = f"sc{uuid.uuid4().hex[:6]}"


def _kafkron(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _env(layout: ClusterLayout, extra: dict[str, str]) -> dict[str, str]:
    plain = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KAFKRON_SECURITY", "KAFKRON_SASL", "KAFKRON_SSL", "KAFKRON_CLIENT"))
    }
    return plain | {"KAFKRON_BOOTSTRAP": layout.bootstrap, "KAFKRON_NAMESPACE": NAMESPACE} | extra


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterLayout]:
    raw = os.environ.get("KAFKRON_SECURE_CLUSTER_TEST_PORT")
    port = int(raw) if raw else free_port_block(2 * NODES)
    made = ClusterLayout(port, tmp_path_factory.mktemp("secure-cluster") / "cluster", NODES)
    where = ("--port", str(made.port), "--data-dir", str(made.data_dir))
    try:
        started = _kafkron(_env(made, {}), "broker", "start", "--nodes", "3", "--secure", *where)
        assert started.returncode == 0, started.stdout + started.stderr
        yield made
    finally:
        _kafkron(_env(made, {}), "broker", "stop", *where)


def _user_env(layout: ClusterLayout, user: str, password_file: Path) -> dict[str, str]:
    return _env(
        layout,
        {
            "KAFKRON_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKRON_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKRON_SASL_USERNAME": user,
            "KAFKRON_SASL_PASSWORD_FILE": str(password_file),
            "KAFKRON_SSL_CAFILE": str(broker_secure.ca_file(layout.node(1))),
        },
    )


async def _lagging(layout: ClusterLayout) -> list[str]:
    """Partitions of the namespace whose in-sync replicas are fewer than three."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=layout.bootstrap, **broker_secure.probe_kwargs(layout.node(1))
    )
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(f"{NAMESPACE}.")]
        described = await admin.describe_topics(names)
    finally:
        await admin.close()
    assert len(described) == len(TOPIC_SPECS), described  # every topic of the namespace
    return [
        f"{t['topic']}[{p['partition']}] isr={p['isr']} replicas={p['replicas']}"
        for t in described
        for p in t["partitions"]
        if len(p["replicas"]) != NODES or len(p["isr"]) != NODES
    ]


def test_a_secure_cluster_serves_the_right_principal_and_refuses_a_wrong_password(
    layout: ClusterLayout, tmp_path: Path
) -> None:
    first = layout.node(1)
    # One CA for the cluster: every node uses the cluster's secure dir.
    assert {broker_secure.ca_file(node) for node in layout.node_layouts} == {
        broker_secure.ca_file(first)
    }
    admin = _env(layout, {"KAFKRON_CLIENT_CONFIG": str(broker_secure.admin_config(first))})
    created = _kafkron(admin, "topics", "create", "--partitions", "2")
    assert created.returncode == 0, created.stdout + created.stderr
    password = tmp_path / "sub.pw"
    added = _kafkron(
        admin, "users", "add", "sub", "--role", "submitter", "--password-file", str(password)
    )
    assert added.returncode == 0, added.stdout + added.stderr
    schedule = ("schedule", "add", "x", "--every", "10s", "--job", "test.noop")
    done = _kafkron(_user_env(layout, "sub", password), *schedule)
    assert done.returncode == 0, done.stdout + done.stderr
    wrong = tmp_path / "wrong.pw"
    wrong.write_text("not-the-password-of-sub\n")
    refused = _kafkron(_user_env(layout, "sub", wrong), *schedule)
    assert refused.returncode == 1
    assert "authentication failed for user sub" in refused.stderr, refused.stderr
    assert "not-the-password-of-sub" not in refused.stderr + refused.stdout
    # Replicated over the brokers' own SASL_SSL listener: all three replicas in sync.
    assert asyncio.run(_lagging(layout)) == []
