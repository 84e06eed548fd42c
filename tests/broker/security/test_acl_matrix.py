"""Every role of a namespace is allowed on a real broker exactly what its ACL plan grants.

An independent check of `topics.acl_plan.plan` against a ``--secure`` broker's own
answers, every role of namespace A against every resource a tenant could reach: A's,
another namespace B's, and those of namespaces that look like A with a role's suffix
(``A-worker``, ``A-shard``, ``A-workers``, ``A-schedulers``, ``A_x``), whose names
start like A's groups and (before 0.2) A's transactional ids.

The module starts its own secure single-node broker once (free ports below the
ephemeral range, its own data dir), creates every namespace's topics as ``admin``
(two partitions, one record seeded on each), one user per role of A and a scheduler
and a worker of each other namespace (their grants exist, so a broker that mixed
principals up would show it) with ``kafkron users add``, and stops the broker at the
end.

Each try is a client doing the real thing as one of A's users: a consumer fetching
(without a group and with the role's group), a producer writing, a consumer joining
each namespace's groups, DescribeGroups, DescribeConfigs, a transactional producer
starting (FindCoordinator and InitProducerId) on every form of transactional id, and
the metadata request that shows a topic. Its outcome is what the broker said: records,
an assignment, a producer id, or an authorization error; anything else (a timeout,
another error) is reported as unclear, never taken for a denial. Each outcome is
compared with what ``plan(role, A)`` grants by `topics.acl_plan.Acl.matches`, whatever
``kafkron users add`` granted. The broker's own ACL table (DescribeAcls) is compared
with every user's plan too: it shows a grant no try exercises (Delete, Alter, a
cluster ACL, a DENY, a host).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.cluster import ClusterMetadata
from aiokafka.conn import create_conn
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.protocol.admin import DescribeAclsRequest
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.protocol.metadata import MetadataRequest

from actors.broker import BrokerLayout
from actors.broker import process as broker_process
from actors.broker import secure as broker_secure
from tests.kit.paths import REPO
from tests.kit.ports import free_port_block
from topics.acl_plan import Operation, PatternType, ResourceType, Role, plan
from topics.names import Settings, TopicKind, TxnIds
from topics.security import ClientSecurity, client_kwargs

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(900),
    # aiokafka leaves the socket of a connection the broker refused during the TLS or
    # SASL handshake to the garbage collector; refusing is what these tests provoke.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

PARTITIONS = 2
# The eight topics of a namespace, as the README's role table names them.
# Every topic of a namespace, from the product (a kind added there is tried here too).
TOPIC_KINDS = tuple(sorted(kind.value for kind in TopicKind))
LOOK_ALIKE_SUFFIXES = ("-worker", "-shard", "-workers", "-schedulers", "_x")
# The roles each other namespace gets a user of, so that grants of theirs exist.
OTHER_ROLES = (Role.SCHEDULER, Role.WORKER)
TRY_TIMEOUT_S = 30.0  # a safety net only: allowances and refusals both answer at once
PARALLEL_TRIES = 24
PARALLEL_COMMANDS = 3  # `kafkron users add` runs two JVMs at a time itself
TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
READ, WRITE = Operation.READ, Operation.WRITE
DESCRIBE, DESCRIBE_CONFIGS = Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS
# Kafka's error codes in the answers read here.
NONE, TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND = 0, 29, 30, 69


def topics_of(namespace: str) -> list[str]:
    return [f"{namespace}.{kind}" for kind in TOPIC_KINDS]


def groups_of(namespace: str) -> list[str]:
    return [f"{namespace}-schedulers", f"{namespace}-workers", f"{namespace}-recorder"]


def transactional_ids_of(namespace: str) -> list[str]:
    """Every form an id of `namespace` has had: 0.2's ``.`` form and 0.1's ``-`` form."""
    return [
        f"{namespace}{sep}{kind}{sep}{p}"
        for sep in (".", "-")
        for kind in ("shard", "worker")
        for p in range(PARTITIONS)
    ]


def user_of(role: Role, namespace: str) -> str:
    return f"{role.value}-{namespace}"


# The group a role's clients read with, and a topic of its own it joins a group with:
# the role table's "what its clients do", written out rather than taken from the plan.
ROLE_GROUP = {Role.SCHEDULER: "-schedulers", Role.WORKER: "-workers", Role.RECORDER: "-recorder"}
JOIN_TOPIC = {
    Role.SCHEDULER: "commands",
    Role.WORKER: "runs",
    Role.RECORDER: "runs",
    Role.SUBMITTER: "rejected",
    Role.VIEWER: "runs",
}


@dataclass(frozen=True)
class Matrix:
    layout: BrokerLayout
    a: str
    others: tuple[str, ...]  # B, then the look-alikes
    secrets: Path

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.a, *self.others)

    @property
    def users(self) -> list[tuple[Role, str]]:
        """(role, namespace) of every user: each role of A, a few of each other namespace."""
        return [(r, self.a) for r in Role] + [(r, ns) for ns in self.others for r in OTHER_ROLES]

    @property
    def ca(self) -> str:
        return str(broker_secure.ca_file(self.layout))

    def password(self, user: str) -> str:
        if user == "admin":
            path = broker_secure.secure_dir(self.layout) / "admin.password"
        else:
            path = self.secrets / f"{user}.pw"
        return path.read_text().strip()

    def security(self, user: str, password: str | None = None) -> ClientSecurity:
        secret = self.password(user) if password is None else password
        return ClientSecurity("SASL_SSL", "SCRAM-SHA-512", user, secret, self.ca)

    def kwargs(self, user: str) -> dict[str, Any]:
        """aiokafka keyword arguments of `user`, as kafkron's own clients build them."""
        return {"bootstrap_servers": self.layout.bootstrap, **client_kwargs(self.security(user))}

    def admin_env(self, namespace: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("KAFKRON_SECURITY", "KAFKRON_SASL", "KAFKRON_SSL", "KAFKRON_CLIENT")
            )
        }
        env |= {
            "KAFKRON_BOOTSTRAP": self.layout.bootstrap,
            "KAFKRON_NAMESPACE": namespace,
            "KAFKRON_CLIENT_CONFIG": str(broker_secure.admin_config(self.layout)),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        return env


def _kafkron_all(commands: list[tuple[dict[str, str], list[str]]]) -> list[str]:
    """Run the ``kafkron`` commands, a few at a time; what each failed one said."""

    def run(command: tuple[dict[str, str], list[str]]) -> str | None:
        env, argv = command
        done = subprocess.run(
            [sys.executable, "-m", "actors.cli", *argv],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return None if done.returncode == 0 else f"kafkron {' '.join(argv)}: {done.stderr}"

    with ThreadPoolExecutor(PARALLEL_COMMANDS) as pool:
        return [failure for failure in pool.map(run, commands) if failure]


async def _retrying(call: Callable[[], Awaitable[Any]]) -> Any:
    """`call` again while it fails with a retriable error (a coordinator still loading)."""
    while True:
        try:
            return await call()
        except KafkaError as exc:
            if not exc.retriable:
                raise
        await asyncio.sleep(0.2)


async def _seed(matrix: Matrix) -> None:
    """One record on every partition of every topic (an allowed fetch returns one), and
    the internal topics of groups and transactions made before the tries race for them."""
    admin = matrix.kwargs("admin")
    producer = AIOKafkaProducer(**admin)
    await producer.start()
    try:
        topics = [t for namespace in matrix.namespaces for t in topics_of(namespace)]
        # Each topic's own count: {ns}.calendars has one partition whatever PARTITIONS says.
        counts = [len(await producer.partitions_for(topic)) for topic in topics]
        sends = [
            producer.send_and_wait(topic, b"{}", key=b"seed", partition=p)
            for topic, count in zip(topics, counts, strict=True)
            for p in range(count)
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()
    client = AIOKafkaAdminClient(**admin)
    await client.start()
    try:
        await _retrying(lambda: client.find_coordinator(f"{matrix.a}-warm-up", 0))
        await _retrying(lambda: client.find_coordinator(f"{matrix.a}.warm-up", 1))
    finally:
        await client.close()


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    started = time.monotonic()
    data = tmp_path_factory.mktemp("acl-matrix")
    layout = BrokerLayout(port=free_port_block(2), data_dir=data / "broker")
    broker_process.start(layout, timeout_s=300, secure=True)
    try:
        a = f"m{uuid.uuid4().hex[:6]}"
        others = (f"n{a[1:]}", *(a + suffix for suffix in LOOK_ALIKE_SUFFIXES))
        made = Matrix(layout, a, others, data)
        commands = [
            (made.admin_env(ns), ["topics", "create", "--partitions", str(PARTITIONS)])
            for ns in made.namespaces
        ]
        commands += [
            (
                made.admin_env(ns),
                [
                    *("users", "add", user_of(role, ns), "--role", role.value),
                    *("--namespace", ns, "--password-file", str(data / f"{user_of(role, ns)}.pw")),
                ],
            )
            for role, ns in made.users
        ]
        failures = _kafkron_all(commands)
        assert failures == [], "\n".join(failures)
        asyncio.run(_seed(made))
        setup_s = time.monotonic() - started
        print(
            f"\nACL matrix: broker, {len(made.namespaces)} namespaces' topics and"
            f" {len(made.users)} users ready in {setup_s:.1f} s"
        )
        yield made
    finally:
        broker_process.stop(layout)


@pytest.fixture(autouse=True)
def _collect_refused_sockets() -> Iterator[None]:
    """Collect a refused client's leftover socket while this module's filter still applies."""
    yield
    gc.collect()


Need = tuple[ResourceType, str, Operation]


@dataclass(frozen=True)
class Question:
    """One try of one of A's users: `operation` on the resource, made by `how`.

    `also` lists what else the try needs granted (a consumer with a group also asks
    the group; a transactional producer asks for its coordinator before its id)."""

    role: Role
    resource: ResourceType
    name: str
    operation: Operation
    how: str
    also: tuple[Need, ...] = field(default=())

    def planned(self, namespace: str) -> bool:
        """True if ``plan(role, namespace)`` grants everything this try needs."""
        acls = plan(self.role, namespace)
        needs = ((self.resource, self.name, self.operation), *self.also)
        return all(any(acl.matches(r, n, op) for acl in acls) for r, n, op in needs)

    def __str__(self) -> str:
        return f"{self.role.value}: {self.operation.value} {self.resource.value} {self.name}"


@dataclass(frozen=True)
class Answer:
    question: Question
    allowed: bool | None  # None: neither an allowance nor an authorization error
    detail: str


class Unclear(Exception):
    """The broker's answer was neither an allowance nor an authorization refusal."""


Outcome = tuple[bool, str]


async def _metadata(client: Any, topic: str) -> Outcome:
    """A metadata request for the one topic (one for all topics leaves refused ones out)."""
    metadata = ClusterMetadata()
    if not await client._metadata_update(metadata, [topic]):
        raise Unclear("no metadata answer")
    if topic in metadata.unauthorized_topics:
        return False, "Metadata: TOPIC_AUTHORIZATION_FAILED"
    if metadata.partitions_for_topic(topic):
        return True, "Metadata: the topic and its partitions"
    raise Unclear(f"Metadata: {topic} neither shown nor refused")


async def _direct_fetch(client: Any, topic: str) -> Outcome:
    """The Fetch a consumer would send, sent by its client: aiokafka's fetcher waits
    forever for a leader the refused metadata never names."""
    node = min(broker.nodeId for broker in client.cluster.brokers())
    partitions = [(p, 0, 1 << 20) for p in range(PARTITIONS)]
    response = await client.send(node, FetchRequest(100, 1, 1 << 20, 0, [(topic, partitions)]))
    codes = {part[1] for _, parts in response.topics for part in parts}
    if codes == {TOPIC_AUTHORIZATION_FAILED}:
        return False, "Fetch (sent directly, no metadata): TOPIC_AUTHORIZATION_FAILED"
    if codes == {NONE}:
        return True, "Fetch (sent directly, no metadata): answered"
    raise Unclear(f"Fetch (sent directly): error codes {sorted(codes)}")


async def _fetch(kwargs: dict[str, Any], topic: str, group: str | None) -> Outcome:
    """A consumer reads `topic` from the start (with `group`: from its committed offsets,
    which asks the group too): a seeded record, or the broker's refusal."""
    consumer = AIOKafkaConsumer(
        group_id=group, enable_auto_commit=False, auto_offset_reset="earliest", **kwargs
    )
    await consumer.start()
    try:
        shown, _ = await _metadata(consumer._client, topic)
        if not shown:
            return await _direct_fetch(consumer._client, topic)
        # Each topic's own partitions: {ns}.calendars has one whatever PARTITIONS says.
        metadata = await consumer._client.fetch_all_metadata()
        partitions = metadata.partitions_for_topic(topic) or set(range(PARTITIONS))
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        await consumer.seek_to_beginning()
        while True:
            try:
                batches = await consumer.getmany(timeout_ms=200)
            except (TopicAuthorizationFailedError, GroupAuthorizationFailedError) as exc:
                return False, f"Fetch: {exc!r}"
            records = sum(len(batch) for batch in batches.values())
            if records:
                return True, f"Fetch: {records} record(s)"
    finally:
        await consumer.stop()


async def _produce(kwargs: dict[str, Any], topic: str) -> Outcome:
    # Not idempotent: its InitProducerId would need Write on some topic, which is not
    # what this try asks.
    producer = AIOKafkaProducer(enable_idempotence=False, request_timeout_ms=10_000, **kwargs)
    await producer.start()
    try:
        written = await producer.send_and_wait(topic, b"{}", key=b"acl-matrix")
    except TopicAuthorizationFailedError as exc:
        return False, f"Produce: {exc!r}"
    finally:
        await producer.stop()
    return True, f"Produce: written at {topic}[{written.partition}]@{written.offset}"


async def _join(kwargs: dict[str, Any], group: str, topic: str) -> Outcome:
    """A consumer of `group` subscribes `topic`: an assignment, or the group refused."""
    consumer = AIOKafkaConsumer(
        group_id=group, enable_auto_commit=False, auto_offset_reset="latest", **kwargs
    )
    await consumer.start()
    try:
        consumer.subscribe([topic])
        while not consumer.assignment():
            try:
                await consumer.getmany(timeout_ms=200)
            except GroupAuthorizationFailedError as exc:
                return False, f"FindCoordinator/JoinGroup: {exc!r}"
        assigned = sorted(f"{tp.topic}[{tp.partition}]" for tp in consumer.assignment())
        return True, f"JoinGroup: assigned {', '.join(assigned)}"
    finally:
        await consumer.stop()


async def _init_producer_id(kwargs: dict[str, Any], transactional_id: str) -> Outcome:
    producer = AIOKafkaProducer(
        transactional_id=transactional_id, request_timeout_ms=10_000, **kwargs
    )
    try:
        await producer.start()
    except TransactionalIdAuthorizationFailed as exc:
        return False, f"FindCoordinator/InitProducerId: {exc!r}"
    finally:
        await producer.stop()
    return True, "InitProducerId: a producer id and epoch"


async def _describe_configs(admin: AIOKafkaAdminClient, topic: str) -> Outcome:
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    code = responses[0].resources[0][0]
    if code == TOPIC_AUTHORIZATION_FAILED:
        return False, "DescribeConfigs: TOPIC_AUTHORIZATION_FAILED"
    if code == NONE:
        return True, "DescribeConfigs: the topic's configs"
    raise Unclear(f"DescribeConfigs: error code {code}")


async def _describe_group(admin: AIOKafkaAdminClient, group: str) -> Outcome:
    try:
        responses = await _retrying(lambda: admin.describe_consumer_groups([group]))
    except GroupAuthorizationFailedError as exc:
        return False, f"FindCoordinator: {exc!r}"
    code, _, state = responses[0].groups[0][:3]
    if code == GROUP_AUTHORIZATION_FAILED:
        return False, "DescribeGroups: GROUP_AUTHORIZATION_FAILED"
    if code in (NONE, GROUP_ID_NOT_FOUND):
        return True, f"DescribeGroups: state {state!r} (error code {code})"
    raise Unclear(f"DescribeGroups: error code {code}")


async def _find_transaction_coordinator(admin: AIOKafkaAdminClient, txn_id: str) -> Outcome:
    try:
        node = await _retrying(lambda: admin.find_coordinator(txn_id, 1))
    except TransactionalIdAuthorizationFailed as exc:
        return False, f"FindCoordinator: {exc!r}"
    return True, f"FindCoordinator: node {node}"


async def _ask(
    question: Question, probe: Callable[[], Awaitable[Outcome]], gate: asyncio.Semaphore
) -> Answer:
    async with gate:
        try:
            async with asyncio.timeout(TRY_TIMEOUT_S):
                allowed, detail = await probe()
        except TimeoutError:
            return Answer(question, None, f"no answer within {TRY_TIMEOUT_S:.0f} s")
        except Exception as exc:
            return Answer(question, None, f"{type(exc).__name__}: {exc}")
    return Answer(question, allowed, detail)


Try = tuple[Question, Callable[[], Awaitable[Outcome]]]


def _tries(matrix: Matrix, role: Role, admin: AIOKafkaAdminClient) -> list[Try]:
    """Every try of `role`'s user of A on every namespace's resources."""
    a = matrix.a
    kwargs = matrix.kwargs(user_of(role, a))
    own_group = a + ROLE_GROUP[role] if role in ROLE_GROUP else None
    join_topic = f"{a}.{JOIN_TOPIC[role]}"
    q, p = functools.partial(Question, role), functools.partial
    found: list[Try] = []
    for topic in (topic for ns in matrix.namespaces for topic in topics_of(ns)):
        found += [
            (q(TOPIC, topic, DESCRIBE, "metadata"), p(_metadata, admin._client, topic)),
            (q(TOPIC, topic, READ, "consumer, no group"), p(_fetch, kwargs, topic, None)),
            (q(TOPIC, topic, WRITE, "producer"), p(_produce, kwargs, topic)),
            (q(TOPIC, topic, DESCRIBE_CONFIGS, "admin"), p(_describe_configs, admin, topic)),
        ]
        if own_group is not None:  # the consumer also fetches the group's committed offsets
            how, also = f"consumer, group {own_group}", ((GROUP, own_group, DESCRIBE),)
            found.append((q(TOPIC, topic, READ, how, also), p(_fetch, kwargs, topic, own_group)))
    for group in (group for ns in matrix.namespaces for group in groups_of(ns)):
        found += [
            (
                q(GROUP, group, READ, f"consumer of {join_topic}"),
                p(_join, kwargs, group, join_topic),
            ),
            (q(GROUP, group, DESCRIBE, "admin"), p(_describe_group, admin, group)),
        ]
    for txn_id in (txn_id for ns in matrix.namespaces for txn_id in transactional_ids_of(ns)):
        how, also = "transactional producer", ((TXN, txn_id, DESCRIBE),)  # FindCoordinator first
        found += [
            (q(TXN, txn_id, WRITE, how, also), p(_init_producer_id, kwargs, txn_id)),
            (q(TXN, txn_id, DESCRIBE, "admin"), p(_find_transaction_coordinator, admin, txn_id)),
        ]
    return found


async def _every_try(matrix: Matrix) -> list[Answer]:
    gate = asyncio.Semaphore(PARALLEL_TRIES)
    admins = {r: AIOKafkaAdminClient(**matrix.kwargs(user_of(r, matrix.a))) for r in Role}
    for admin in admins.values():
        await admin.start()
    try:
        tries = [t for role, admin in admins.items() for t in _tries(matrix, role, admin)]
        return list(await asyncio.gather(*(_ask(q, probe, gate) for q, probe in tries)))
    finally:
        for admin in admins.values():
            await admin.close()


def _summary(matrix: Matrix, answers: list[Answer], took_s: float) -> str:
    allowed = Counter(answer.question.role for answer in answers if answer.allowed)
    denied = Counter(answer.question.role for answer in answers if answer.allowed is False)
    lines = [
        f"ACL matrix of namespace {matrix.a} against {', '.join(matrix.others)}:"
        f" {len(answers)} tries in {took_s:.1f} s, {sum(allowed.values())} allowed,"
        f" {sum(denied.values())} denied"
    ]
    lines += [
        f"  {role.value}: {allowed[role] + denied[role]} tries, {allowed[role]} allowed,"
        f" {denied[role]} denied"
        for role in Role
    ]
    return "\n".join(lines)


def _finding(answer: Answer, namespace: str) -> str:
    q = answer.question
    broker = "unclear" if answer.allowed is None else "ALLOWS" if answer.allowed else "DENIES"
    planned = "grants" if q.planned(namespace) else "does not grant"
    return f"{q} ({q.how}): the broker {broker} it, the plan {planned} it [{answer.detail}]"


def test_the_product_uses_the_names_this_matrix_tries() -> None:
    """The resources tried are the ones kafkron's clients use, in every id mode."""
    viewer = plan(Role.VIEWER, "mname")  # reads every topic of its namespace
    assert {acl.name for acl in viewer if acl.resource is TOPIC} == set(topics_of("mname"))
    for mode in TxnIds:
        settings = Settings(namespace="mname", txn_ids=mode)
        groups = {settings.scheduler_group, settings.worker_group, settings.recorder_group}
        assert groups == set(groups_of("mname"))
        for p in range(PARTITIONS):
            for kind in ("shard", "worker"):
                assert set(settings.fenced_ids(kind, p)) <= set(transactional_ids_of("mname"))


def test_every_role_is_allowed_exactly_its_plan(
    matrix: Matrix, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="aiokafka")  # a refusal logged per try
    started = time.monotonic()
    answers = asyncio.run(_every_try(matrix))
    took_s = time.monotonic() - started
    print("\n" + _summary(matrix, answers, took_s))
    unclear = [_finding(answer, matrix.a) for answer in answers if answer.allowed is None]
    mismatches = [
        _finding(answer, matrix.a)
        for answer in answers
        if answer.allowed is not None and answer.allowed != answer.question.planned(matrix.a)
    ]
    for title, found in (("mismatches", mismatches), ("unclear tries", unclear)):
        print(f"{title}: {len(found)}", *found, sep="\n  ")
    assert mismatches == [], "\n".join(mismatches)
    assert unclear == [], "\n".join(unclear)
    # The matrix is not vacuous: each role is allowed something and denied something.
    for role in Role:
        seen = {answer.allowed for answer in answers if answer.question.role is role}
        assert seen == {True, False}, role


# Kafka's codes of the ACL fields (org.apache.kafka.common.acl, ...resource).
KAFKA_RESOURCE = {TOPIC: 2, GROUP: 3, TXN: 5}
KAFKA_PATTERN = {PatternType.LITERAL: 3, PatternType.PREFIXED: 4}
KAFKA_OPERATION = {READ: 3, WRITE: 4, DESCRIBE: 8, DESCRIBE_CONFIGS: 10}
ANY, ALLOW = 1, 3
# principal, resource type, name, pattern type, operation, host, permission
BrokerAcl = tuple[str, int, str, int, int, str, int]


async def _broker_acls(matrix: Matrix) -> set[BrokerAcl]:
    """Every ACL the broker holds, as DescribeAcls with a filter matching all gives them."""
    admin = AIOKafkaAdminClient(**matrix.kwargs("admin"))
    await admin.start()
    try:
        client = admin._client
        request = DescribeAclsRequest(ANY, None, ANY, None, None, ANY, ANY)
        response = await client.send(client.get_random_node(), request)
    finally:
        await admin.close()
    assert response.error_code == NONE, response
    return {
        (principal, resource_type, name, pattern_type, operation, host, permission)
        for resource_type, name, pattern_type, acls in response.resources
        for principal, host, operation, permission in acls
    }


def test_the_broker_holds_exactly_each_users_plan(matrix: Matrix) -> None:
    """Nothing beyond the plan was granted: no other operation (Delete, Alter, a cluster
    ACL) that the tries above do not exercise, no DENY, no host but ``*``."""
    expected = {
        (
            f"User:{user_of(role, ns)}",
            KAFKA_RESOURCE[acl.resource],
            acl.name,
            KAFKA_PATTERN[acl.pattern],
            KAFKA_OPERATION[acl.operation],
            "*",
            ALLOW,
        )
        for role, ns in matrix.users
        for acl in plan(role, ns)
    }
    held = asyncio.run(_broker_acls(matrix))
    assert sorted(held - expected) == [], "held but not planned"
    assert sorted(expected - held) == [], "planned but not held"


async def _connect(matrix: Matrix, security: ClientSecurity) -> str:
    """What the broker does with one connection of `security` asking for metadata."""
    host, port = matrix.layout.bootstrap.rsplit(":", 1)
    try:
        async with asyncio.timeout(15):
            conn = await create_conn(
                host, int(port), request_timeout_ms=10_000, **client_kwargs(security)
            )
            try:
                await conn.send(MetadataRequest([]))
            finally:
                conn.close()
    except SaslAuthenticationFailed:
        return "authentication failed"
    except KafkaConnectionError:
        return "connection closed"
    except TimeoutError:
        return "no answer"
    return "served"


def test_a_wrong_password_is_refused(matrix: Matrix) -> None:
    async def each() -> dict[str, str]:
        seen = {}
        for role in Role:
            user = user_of(role, matrix.a)
            seen[f"{user} right"] = await _connect(matrix, matrix.security(user))
            wrong = "x" + matrix.password(user)
            seen[f"{user} wrong"] = await _connect(matrix, matrix.security(user, wrong))
        stranger = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "nobody", "n0-such-user", matrix.ca)
        seen["unknown user"] = await _connect(matrix, stranger)
        return seen

    seen = asyncio.run(each())
    expected = {
        key: "served" if key.endswith(" right") else "authentication failed" for key in seen
    }
    assert seen == expected


def test_a_client_without_sasl_or_tls_is_refused(matrix: Matrix) -> None:
    user = user_of(Role.VIEWER, matrix.a)
    password = matrix.password(user)
    clients = {
        "plaintext": ClientSecurity(),
        "TLS without SASL": ClientSecurity("SSL", cafile=matrix.ca),
        "SASL without TLS": ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", user, password),
        "SASL_SSL (the control)": matrix.security(user),
    }

    async def each() -> dict[str, str]:
        return {name: await _connect(matrix, security) for name, security in clients.items()}

    seen = asyncio.run(each())
    assert seen["SASL_SSL (the control)"] == "served"
    refused = {name: outcome for name, outcome in seen.items() if "control" not in name}
    assert refused == dict.fromkeys(refused, "connection closed"), seen
