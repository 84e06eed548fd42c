"""A `--secure` broker refuses whom it must, and each actor works under its own principal.

The module starts its own secure single-node broker once (certificates, SCRAM users
and ACLs cost seconds) with the product's launcher, on ``KAFKRON_SECURE_TEST_PORT``
(default: a free pair of ports below the ephemeral range; the controller takes + 1),
creates two namespaces as ``admin`` and one user per role with ``kafkron users add``,
and stops the broker at the end.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    KafkaConnectionError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)

from actors.broker import BrokerLayout
from actors.broker import process as broker_process
from actors.broker import secure as broker_secure
from actors.broker.tools import KafkaTools, acl_run
from tests.kit.paths import REPO
from tests.kit.ports import free_port_block
from topics.messages import Run, parse_result, parse_run
from topics.names import Settings, TopicKind, TxnIds
from topics.refusals import topic_denied
from topics.security import ClientSecurity, client_kwargs

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(900),
    # aiokafka leaves the socket of a connection the broker refused during the TLS or
    # SASL handshake to the garbage collector; refusing is what these tests provoke.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

# The broker listens on PORT, its controller on PORT + 1: a free pair unless told.
PORT = int(os.environ.get("KAFKRON_SECURE_TEST_PORT") or free_port_block(2))
USERS = {
    "sched-a": "scheduler",
    "work-a": "worker",
    "rec-a": "recorder",
    "sub-a": "submitter",
}


@dataclass(frozen=True)
class SecureCluster:
    layout: BrokerLayout
    a: Settings
    b: Settings
    secrets: Path

    @property
    def bootstrap(self) -> str:
        return self.layout.bootstrap

    @property
    def ca(self) -> str:
        return str(broker_secure.ca_file(self.layout))

    def password_file(self, user: str) -> Path:
        return self.secrets / f"{user}.pw"

    def env(
        self, user: str | None, namespace: str, password_file: Path | None = None
    ) -> dict[str, str]:
        """A process environment for `user` (None: no security settings at all)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("KAFKRON_SECURITY", "KAFKRON_SASL", "KAFKRON_SSL", "KAFKRON_CLIENT")
            )
        }
        env |= {"KAFKRON_BOOTSTRAP": self.bootstrap, "KAFKRON_NAMESPACE": namespace}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        if user == "admin":
            env["KAFKRON_CLIENT_CONFIG"] = str(broker_secure.admin_config(self.layout))
        elif user is not None:
            env |= {
                "KAFKRON_SECURITY_PROTOCOL": "SASL_SSL",
                "KAFKRON_SASL_MECHANISM": "SCRAM-SHA-512",
                "KAFKRON_SASL_USERNAME": user,
                "KAFKRON_SASL_PASSWORD_FILE": str(password_file or self.password_file(user)),
                "KAFKRON_SSL_CAFILE": self.ca,
            }
        return env

    def kwargs(self, user: str) -> dict[str, Any]:
        """aiokafka keyword arguments of `user`, as kafkron's own clients build them."""
        if user == "admin":
            password = (broker_secure.secure_dir(self.layout) / "admin.password").read_text()
        else:
            password = self.password_file(user).read_text()
        security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", user, password.strip(), self.ca)
        return {"bootstrap_servers": self.bootstrap, **client_kwargs(security)}


def kafkron(
    env: dict[str, str], *argv: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    data = tmp_path_factory.mktemp("secure-broker")
    layout = BrokerLayout(port=PORT, data_dir=data / "broker")
    broker_process.start(layout, timeout_s=300, secure=True)
    try:
        tag = uuid.uuid4().hex[:6]
        made = SecureCluster(
            layout,
            Settings(namespace=f"sa{tag}", bootstrap=layout.bootstrap),
            Settings(namespace=f"sb{tag}", bootstrap=layout.bootstrap),
            data,
        )
        for settings in (made.a, made.b):
            done = kafkron(
                made.env("admin", settings.namespace), "topics", "create", "--partitions", "2"
            )
            assert done.returncode == 0, done.stderr
        # One user per role of namespace a, as an admin would create them.
        for user, role in USERS.items():
            added = kafkron(
                made.env("admin", made.a.namespace),
                *("users", "add", user, "--role", role, "--namespace", made.a.namespace),
                *("--password-file", str(made.password_file(user))),
            )
            assert added.returncode == 0, added.stdout + added.stderr
        yield made
    finally:
        broker_process.stop(layout)


@pytest.fixture(autouse=True)
def _collect_refused_sockets() -> Iterator[None]:
    """Collect a refused client's leftover socket while this module's filter still applies.

    Left to a later collection, its ResourceWarning would surface in another module.
    """
    yield
    gc.collect()


def test_an_unauthenticated_client_is_refused(cluster: SecureCluster) -> None:
    async def plain() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(KafkaConnectionError):
        asyncio.run(plain())
    done = kafkron(cluster.env(None, cluster.a.namespace), "ls")
    assert done.returncode == 1
    assert "requires authentication" in done.stderr


def test_a_wrong_password_is_refused_and_never_printed(cluster: SecureCluster) -> None:
    wrong = cluster.secrets / "wrong.pw"
    wrong.write_text("not-the-password-of-sub-a\n")
    env = cluster.env("sub-a", cluster.a.namespace, password_file=wrong)
    done = kafkron(env, "schedule", "add", "x", "--every", "10s", "--job", "test.noop")
    assert done.returncode == 1
    assert "authentication failed for user sub-a" in done.stderr
    real = cluster.password_file("sub-a").read_text().strip()
    for secret in ("not-the-password-of-sub-a", real):
        assert secret not in done.stderr + done.stdout


async def _send(kwargs: dict[str, Any], topic: str, **extra: Any) -> None:
    producer = AIOKafkaProducer(request_timeout_ms=10_000, **kwargs, **extra)
    await producer.start()
    try:
        await asyncio.wait_for(producer.send_and_wait(topic, b"{}", key=b"k"), 30)
    finally:
        await producer.stop()


async def _start_transactional(kwargs: dict[str, Any], transactional_id: str) -> None:
    producer = AIOKafkaProducer(transactional_id=transactional_id, **kwargs)
    try:
        await asyncio.wait_for(producer.start(), 30)
    finally:
        await producer.stop()


async def _read_denied(kwargs: dict[str, Any], topic: str) -> bool:
    """True if the broker refuses `topic` to this user (kafkron's own check)."""
    consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, **kwargs)
    await consumer.start()
    try:
        return await topic_denied(consumer._client, topic)
    finally:
        await consumer.stop()


def test_a_submitter_writes_commands_and_nothing_else(cluster: SecureCluster) -> None:
    sub = cluster.kwargs("sub-a")
    a, b = cluster.a, cluster.b
    asyncio.run(_send(sub, a.topic(TopicKind.COMMANDS)))  # allowed: the control
    for kind in (TopicKind.RUNS, TopicKind.SCHEDULES):
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(_send(sub, a.topic(kind)))
    assert not asyncio.run(_read_denied(sub, a.topic(TopicKind.REJECTED)))  # allowed
    assert asyncio.run(_read_denied(sub, b.topic(TopicKind.RESULTS)))
    assert asyncio.run(_read_denied(sub, a.topic(TopicKind.RESULTS)))
    # The command line names the operation, the resource and the role that grants it.
    done = kafkron(cluster.env("sub-a", a.namespace), "ls")
    assert done.returncode == 1
    assert f"User:sub-a may not Read topic {a.topic(TopicKind.SCHEDULES)}" in done.stderr
    assert f"--role viewer --namespace {a.namespace}" in done.stderr


def test_a_worker_cannot_write_schedules_nor_use_a_shard_transactional_id(
    cluster: SecureCluster,
) -> None:
    work = cluster.kwargs("work-a")
    a = cluster.a
    asyncio.run(_start_transactional(work, a.worker_transactional_id(0)))  # allowed
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_send(work, a.topic(TopicKind.SCHEDULES)))
    with pytest.raises(TransactionalIdAuthorizationFailed):
        asyncio.run(_start_transactional(work, a.shard_transactional_id(0)))


@pytest.mark.parametrize(("user", "suffix"), [("work-a", "-worker"), ("sched-a", "-shard")])
def test_a_role_cannot_take_the_transactional_ids_of_a_look_alike_namespace(
    cluster: SecureCluster, user: str, suffix: str
) -> None:
    """Namespace ``{a}-worker``'s ids once lay inside ``{a}``'s worker grant (the
    prefix ``{a}-worker-``): its worker could fence the look-alike's shard 0."""
    kwargs = cluster.kwargs(user)
    look_alike = Settings(namespace=cluster.a.namespace + suffix)
    for mode in TxnIds:
        form = Settings(namespace=look_alike.namespace, txn_ids=mode)
        for tx_id in (form.shard_transactional_id(0), form.worker_transactional_id(0)):
            with pytest.raises(TransactionalIdAuthorizationFailed):
                asyncio.run(_start_transactional(kwargs, tx_id))


def test_a_principal_of_namespace_a_cannot_schedule_in_b(cluster: SecureCluster) -> None:
    b = cluster.b
    done = kafkron(
        cluster.env("sub-a", b.namespace), "schedule", "add", "x", "--every", "10s", "--job", "t.x"
    )
    assert done.returncode == 1
    assert f"User:sub-a may not Write topic {b.topic(TopicKind.COMMANDS)}" in done.stderr
    sched = cluster.kwargs("sched-a")
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_send(sched, b.topic(TopicKind.RUNS)))
    with pytest.raises(TransactionalIdAuthorizationFailed):
        asyncio.run(_start_transactional(sched, b.shard_transactional_id(0)))


async def _results(
    kwargs: dict[str, Any], topic: str, timeout_s: float, alive: Callable[[], bool]
) -> list[dict[str, Any]]:
    """Committed results of `topic` read as admin, until one succeeded, an actor died
    or the timeout."""
    consumer = AIOKafkaConsumer(
        enable_auto_commit=False, group_id=None, isolation_level="read_committed", **kwargs
    )
    await consumer.start()
    seen: list[dict[str, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in (0, 1)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive():
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                seen += [orjson.loads(r.value) for r in records if r.value]
            if any(r.get("status") == "succeeded" for r in seen):
                break
    finally:
        await consumer.stop()
    return seen


def test_the_flow_runs_with_each_actor_under_its_own_principal(cluster: SecureCluster) -> None:
    a = cluster.a
    logs = cluster.secrets / "flow"
    logs.mkdir()
    actors = {
        "scheduler": ("sched-a", ["scheduler"]),
        "worker": ("work-a", ["worker", "--jobs", "tests.jobs.worker"]),
        "recorder": ("rec-a", ["recorder", "--db", str(logs / "history.db")]),
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, (user, argv) in actors.items():
            with (logs / f"{name}.log").open("wb") as log:
                procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "actors.cli", *argv],
                    env=cluster.env(user, a.namespace),
                    cwd=REPO,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        done = kafkron(
            cluster.env("sub-a", a.namespace),
            "schedule", "add", "secure-noop", "--every", "2s", "--job", "test.noop",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        results = asyncio.run(
            _results(
                cluster.kwargs("admin"),
                a.topic(TopicKind.RESULTS),
                240,
                lambda: all(proc.poll() is None for proc in procs.values()),
            )
        )
        running = {name: proc.poll() is None for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    output = {name: (logs / f"{name}.log").read_text(errors="replace") for name in actors}
    assert running == dict.fromkeys(actors, True), output
    assert any(r.get("status") == "succeeded" for r in results), output
    for name, text in output.items():
        assert "AuthorizationFailed" not in text, (name, text)
        assert "not authorized" not in text.lower(), (name, text)


def _acl_change(cluster: SecureCluster, change: str, user: str, operation: str, topic: str) -> None:
    """``change`` "--add" or "--remove" one topic ACL of `user`, as the admin would."""
    admin = cluster.kwargs("admin")
    security = ClientSecurity(
        "SASL_SSL", "SCRAM-SHA-512", "admin", admin["sasl_plain_password"], cluster.ca
    )
    arguments = [change, "--allow-principal", f"User:{user}", "--operation", operation]
    arguments += ["--topic", topic] + (["--force"] if change == "--remove" else [])
    KafkaTools(cluster.bootstrap, security).run([acl_run(arguments, f"{operation} on {topic}")])


async def _committed_values(kwargs: dict[str, Any], topic: str) -> list[bytes]:
    """Every committed record of `topic` (two partitions) to its end, read as `kwargs`."""
    consumer = AIOKafkaConsumer(
        enable_auto_commit=False, group_id=None, isolation_level="read_committed", **kwargs
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(tps)
        seen: list[bytes] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                seen += [r.value for r in records if r.value]
        return seen
    finally:
        await consumer.stop()


def _wait_for(
    what: str, check: Callable[[], bool], timeout_s: float, why: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"no {what}: {why()}"
        time.sleep(1)


def test_revoking_the_schedulers_runs_acl_commits_nothing_partial_and_firing_resumes(
    cluster: SecureCluster,
) -> None:
    """Write on ``{ns}.runs`` is revoked while a schedule fires every second, then given back.

    While refused, the scheduler names the ACL and the role that grants it and keeps
    running; once restored, every occurrence has exactly one committed first attempt:
    a transaction that wrote the changelog or the offsets without its runs would lose
    occurrences, one that wrote runs twice would duplicate them.
    """
    a = cluster.a
    runs = a.topic(TopicKind.RUNS)
    schedule = f"revoke-{uuid.uuid4().hex[:6]}"
    log_path = cluster.secrets / f"{schedule}.log"
    admin = cluster.kwargs("admin")

    def mine() -> list[Run]:
        values = asyncio.run(_committed_values(admin, runs))
        return [run for run in map(parse_run, values) if run.schedule_id == schedule]

    proc = _actor(cluster, "sched-a", ["scheduler"], log_path)
    output = lambda: log_path.read_text(errors="replace")  # noqa: E731
    try:
        done = kafkron(
            cluster.env("sub-a", a.namespace),
            *("schedule", "add", schedule, "--every", "1s", "--job", "test.noop"),
            *("--misfire", "catch_up", "--catch-up-max", "1000", "--overlap", "allow"),
            *("--max-attempts", "1", "--timeout-s", "600"),
        )
        assert done.returncode == 0, done.stderr
        _wait_for("first fires", lambda: len(mine()) >= 2, 120, output)
        _acl_change(cluster, "--remove", "sched-a", "Write", runs)
        refused = f"User:sched-a may not Write topic {runs}"
        _wait_for("refusal named", lambda: refused in output(), 120, output)
        before = len(mine())
        _acl_change(cluster, "--add", "sched-a", "Write", runs)
        _wait_for("fires after the restore", lambda: len(mine()) > before + 3, 180, output)
        assert proc.poll() is None, output()
    finally:
        _stop([proc])
    kafkron(cluster.env("sub-a", a.namespace), "schedule", "rm", schedule)
    text = output()
    assert "Write is granted to role scheduler" in text, text
    firsts = [run.scheduled_ms for run in mine() if run.attempt == 1]
    assert len(firsts) == len(set(firsts)), "an occurrence fired twice"
    expected = list(range(min(firsts), max(firsts) + 1, 1000))
    assert sorted(firsts) == expected, "an occurrence was lost"


def test_revoking_the_workers_results_acl_commits_nothing_partial_and_nothing_is_lost(
    cluster: SecureCluster,
) -> None:
    """Write on ``{ns}.results`` is revoked from the worker while runs arrive, then given back.

    While refused, the worker names the ACL and the role that grants it and keeps
    running; once restored, every run fired has exactly one committed result: a
    transaction that committed the runs offset without its results would lose one,
    one that wrote results twice would duplicate it.
    """
    a = cluster.a
    schedule = f"wrevoke-{uuid.uuid4().hex[:6]}"
    results = a.topic(TopicKind.RESULTS)
    admin = cluster.kwargs("admin")
    logs = {name: cluster.secrets / f"{schedule}-{name}.log" for name in ("sched", "work")}

    def committed(topic: str) -> list[bytes]:
        return asyncio.run(_committed_values(admin, topic))

    def fired() -> set[str]:
        runs = map(parse_run, committed(a.topic(TopicKind.RUNS)))
        return {run.run_id for run in runs if run.schedule_id == schedule}

    def results_by_run() -> dict[str, int]:
        counts: dict[str, int] = {}
        for result in map(parse_result, committed(results)):
            if result.schedule_id == schedule:
                counts[result.run_id] = counts.get(result.run_id, 0) + 1
        return counts

    procs = [
        _actor(cluster, "sched-a", ["scheduler"], logs["sched"]),
        _actor(cluster, "work-a", ["worker", "--jobs", "tests.jobs.worker"], logs["work"]),
    ]
    output = lambda: "\n".join(p.read_text(errors="replace") for p in logs.values())  # noqa: E731
    try:
        done = kafkron(
            cluster.env("sub-a", a.namespace),
            *("schedule", "add", schedule, "--every", "2s", "--job", "test.noop"),
            *("--overlap", "allow", "--max-attempts", "1", "--timeout-s", "600"),
        )
        assert done.returncode == 0, done.stderr
        _wait_for("first results", lambda: len(results_by_run()) >= 2, 120, output)
        _acl_change(cluster, "--remove", "work-a", "Write", results)
        refused = f"User:work-a may not Write topic {results}"
        _wait_for("refusal named", lambda: refused in output(), 120, output)
        _acl_change(cluster, "--add", "work-a", "Write", results)
        # Every run fired before the restore gets its result once the worker writes again.
        owed = fired()
        _wait_for("owed results", lambda: owed <= set(results_by_run()), 180, output)
        assert all(proc.poll() is None for proc in procs), output()
    finally:
        _stop(procs)
    kafkron(cluster.env("sub-a", a.namespace), "schedule", "rm", schedule)
    counts = results_by_run()
    assert {run_id for run_id, n in counts.items() if n > 1} == set(), "a result written twice"
    text = logs["work"].read_text(errors="replace")
    assert "Write is granted to role scheduler or worker" in text, text
    assert "authorized again" in text and "OutOfOrderSequence" not in text, text
    assert "adopting it afresh" not in text, text  # the jobs were not run again


def _actor(
    cluster: SecureCluster, user: str, argv: list[str], log_path: Path
) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "actors.cli", *argv],
            env=cluster.env(user, cluster.a.namespace),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _send_runs(
    kwargs: dict[str, Any], topic: str, records: list[tuple[bytes, bytes]]
) -> None:
    producer = AIOKafkaProducer(acks="all", **kwargs)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def test_the_go_worker_runs_jobs_under_the_worker_role_over_sasl_ssl(
    cluster: SecureCluster,
) -> None:
    """The Go worker (workers/go) reads the same KAFKRON_* security settings as the
    Python worker: SASL_SSL, SCRAM-SHA-512 as `work-a` (role worker), the CA from
    KAFKRON_SSL_CAFILE. Runs written as the shards would reach it, and its results
    commit under that principal alone; its log never shows the password."""
    from tests.conformance.harness import go_worker_binary
    from tests.kit.worker import run_record

    a = cluster.a
    log_path = cluster.secrets / "go-worker.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [go_worker_binary(), "--test-jobs", "--worker-id", "go-secure"],
            env=cluster.env("work-a", a.namespace),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    ids = [f"go-secure-{i}" for i in range(4)]

    def answered() -> list[dict[str, Any]]:
        values = asyncio.run(_committed_values(cluster.kwargs("admin"), a.topic(TopicKind.RESULTS)))
        found = [orjson.loads(v) for v in values]
        return [r for r in found if r.get("schedule_id") in ids]

    try:
        runs = [run_record(sid, "test.noop") for sid in ids]
        asyncio.run(_send_runs(cluster.kwargs("admin"), a.topic(TopicKind.RUNS), runs))
        _wait_for(
            "results of the Go worker",
            lambda: proc.poll() is None and len(answered()) >= len(ids),
            180,
            lambda: log_path.read_text(errors="replace"),
        )
        alive = proc.poll() is None
    finally:
        _stop([proc])
    text = log_path.read_text(errors="replace")
    assert alive, text
    found = answered()
    assert sorted(r["schedule_id"] for r in found) == sorted(ids), found
    for record in found:
        result = parse_result(orjson.dumps(record))
        assert (result.status, result.worker) == ("succeeded", "go-secure"), record
    assert cluster.password_file("work-a").read_text().strip() not in text
    assert "AUTHORIZATION_FAILED" not in text.upper(), text
