"""The HTTP target's one attempt (`actors.worker.http_target.HttpTargets.send`) against
a local server, without Kafka: what is sent, what each answer becomes, and the
egress rule applied to the address connected to."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from actors.worker.egress import EgressRule
from actors.worker.http_target import HttpTargets
from actors.worker.secrets import Secrets
from tests.kit.http_server import Reply, TargetServer
from topics.command_types import Job
from topics.messages import Run, idempotency_key, run_id_for
from topics.targets import HTTP_JOB, target_job
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
LOOPBACK = EgressRule.of(["127.0.0.1"])


def _run(http: Mapping[str, Any], *, attempt: int = 1, schedule_id: str = "hook") -> Run:
    """A run of the HTTP target ``http``, its args normalised by the shard's decoder."""
    name, args = target_job({"http": dict(http)})
    assert name == HTTP_JOB
    run_id = run_id_for(schedule_id, T0)
    return Run(
        run_id=run_id,
        schedule_id=schedule_id,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0 + 5,
        attempt=attempt,
        job=Job(name, args),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=T0 + 60_000,
    )


async def _send(
    http: Mapping[str, Any],
    *,
    rule: EgressRule = LOOPBACK,
    secrets: Secrets | None = None,
    attempt: int = 1,
) -> Any:
    targets = HttpTargets(rule, secrets or Secrets(environ={}))
    try:
        return await targets.send(_run(http, attempt=attempt))
    finally:
        await targets.close()


async def test_a_request_carries_the_runs_key_headers_secret_and_rendered_body() -> None:
    secrets = Secrets(environ={"KAFKRON_SECRET_BILLING_API": "Bearer s3cr3t-token"})
    async with TargetServer({"/charge": [Reply(200, b'{"charged": true}')]}) as server:
        http = {
            "url": server.url("/charge?run={run_id}"),
            "headers": {"Authorization": {"secret": "billing-api"}, "X-Attempt": "{attempt}"},
            "body": {"run": "{run_id}", "at": "{scheduled_at}", "n": 3},
        }
        outcome = await _send(http, secrets=secrets, attempt=2)
    [request] = server.requests
    run = _run(http)
    assert outcome.status == RunStatus.SUCCEEDED and outcome.error is None
    assert outcome.target["http"]["status"] == 200
    assert outcome.target["http"]["body"] == '{"charged": true}'
    assert outcome.target["http"]["duration_ms"] >= 0
    assert request.method == "POST" and request.path == f"/charge?run={run.run_id}"
    assert request.key == run.idempotency_key
    assert request.headers["authorization"] == "Bearer s3cr3t-token"
    assert request.headers["x-attempt"] == "2"
    assert request.headers["kafkron-run-id"] == run.run_id
    assert request.headers["kafkron-attempt"] == "2"
    assert request.headers["content-type"] == "application/json"
    assert orjson.loads(request.body) == {"run": run.run_id, "at": format_ms(T0), "n": 3}
    assert "s3cr3t" not in repr(outcome)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
async def test_retried_statuses_fail_with_a_type_the_retry_policy_retries(status: int) -> None:
    async with TargetServer({"/x": [Reply(status, b"busy")]}) as server:
        outcome = await _send({"url": server.url("/x"), "method": "PUT"})
    assert outcome.status == RunStatus.FAILED
    assert outcome.error["type"] == "HttpStatus"
    assert (
        f"HTTP {status}" in outcome.error["message"]
        and "PUT http://127.0.0.1" in (outcome.error["message"])
    )
    http = outcome.target["http"]
    assert (http["status"], http["body"], sorted(http)) == (
        status,
        "busy",
        ["body", "duration_ms", "status"],
    )
    assert "retry_after_s" not in outcome.error  # none was given


async def test_retry_after_goes_into_the_error_for_the_shard() -> None:
    async with TargetServer({"/x": [Reply(429, headers=(("Retry-After", "7"),))]}) as server:
        outcome = await _send({"url": server.url("/x")})
    assert outcome.error["type"] == "HttpStatus" and outcome.error["retry_after_s"] == "7"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
async def test_other_client_errors_are_final(status: int) -> None:
    async with TargetServer({"/x": [Reply(status)]}) as server:
        outcome = await _send({"url": server.url("/x")})
    assert outcome.error["type"] == "NonRetryable"
    assert outcome.error["message"].startswith(f"HttpStatus: HTTP {status}")
    assert outcome.target["http"]["status"] == status


async def test_a_redirect_is_not_followed_and_is_final() -> None:
    moved = Reply(301, headers=(("Location", "http://169.254.169.254/latest/meta-data/"),))
    async with TargetServer({"/old": [moved]}) as server:
        outcome = await _send({"url": server.url("/old")})
    assert len(server.requests) == 1  # nobody went to the metadata address
    assert outcome.error["type"] == "NonRetryable"
    assert outcome.error["message"].startswith("HttpRedirect: HTTP 301")
    assert "169.254.169.254" in outcome.error["message"]


async def test_a_slow_answer_times_out_at_the_targets_timeout_and_is_retried() -> None:
    async with TargetServer({"/slow": [Reply(200, delay_s=5)]}) as server:
        outcome = await _send({"url": server.url("/slow"), "timeout_s": 1})
    assert outcome.error["type"] == "HttpTimeout"
    assert "within 1 s" in outcome.error["message"]
    assert 900 <= outcome.target["http"]["duration_ms"] < 4000
    assert outcome.target["http"]["status"] is None


async def test_a_refused_connection_is_retried() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nobody listens once it is closed
    outcome = await _send({"url": f"http://127.0.0.1:{port}/x"})
    assert outcome.error["type"] == "HttpConnectionError"
    assert outcome.target["http"]["status"] is None


async def test_only_the_first_kib_of_the_body_is_kept() -> None:
    async with TargetServer({"/big": [Reply(200, b"x" * 100_000)]}) as server:
        outcome = await _send({"url": server.url("/big")})
    assert outcome.target["http"]["body"] == "x" * 1024


async def test_a_secret_the_server_echoes_is_kept_out_of_the_result() -> None:
    secrets = Secrets(environ={"KAFKRON_SECRET_TOKEN": "tok-123456"})
    async with TargetServer({"/echo": [Reply(500, b"bad token tok-123456")]}) as server:
        outcome = await _send(
            {"url": server.url("/echo"), "headers": {"X-Token": {"secret": "token"}}},
            secrets=secrets,
        )
    assert "tok-123456" not in orjson.dumps([outcome.error, outcome.target]).decode()
    assert outcome.target["http"]["body"] == "bad token [secret]"


async def test_a_missing_secret_fails_for_good_naming_it_and_sends_nothing() -> None:
    async with TargetServer() as server:
        outcome = await _send(
            {"url": server.url("/x"), "headers": {"Authorization": {"secret": "billing-api"}}}
        )
    assert server.requests == []
    assert outcome.error["type"] == "NonRetryable"
    assert "'billing-api'" in outcome.error["message"]
    assert "KAFKRON_SECRET_BILLING_API" in outcome.error["message"]
    assert outcome.target is None


async def test_loopback_is_refused_by_default_by_address_and_by_name() -> None:
    async with TargetServer() as server:
        by_address = await _send({"url": server.url("/x")}, rule=EgressRule())
        by_name = await _send({"url": server.url("/x", host="localhost")}, rule=EgressRule())
        mapped = await _send(
            {"url": server.url("/x", host="[::ffff:127.0.0.1]")}, rule=EgressRule()
        )
    assert server.requests == []
    for outcome in (by_address, by_name, mapped):
        assert outcome.status == RunStatus.FAILED
        assert outcome.error["type"] == "NonRetryable"
        assert outcome.error["message"].startswith("EgressRefused: egress refused")
        assert "loopback" in outcome.error["message"]
    assert "localhost resolves to" in by_name.error["message"]


async def test_an_allowed_host_name_may_resolve_to_loopback() -> None:
    async with TargetServer() as server:
        outcome = await _send(
            {"url": server.url("/x", host="localhost")}, rule=EgressRule.of(["localhost"])
        )
    assert outcome.status == RunStatus.SUCCEEDED and len(server.requests) == 1


async def test_every_address_of_a_name_is_checked_and_only_checked_ones_are_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name answering a public and a loopback address is refused as a whole: the
    connector would try the second when the first fails."""
    from aiohttp.resolver import ThreadedResolver

    async def answers(self: Any, host: str, port: int = 0, family: int = 0) -> list[Any]:
        return [
            {
                "hostname": host,
                "host": a,
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
            for a in ("93.184.215.14", "127.0.0.1")
        ]

    monkeypatch.setattr(ThreadedResolver, "resolve", answers)
    outcome = await _send({"url": "http://rebind.example/x"}, rule=EgressRule())
    assert outcome.error["type"] == "NonRetryable"
    assert "rebind.example resolves to 127.0.0.1" in outcome.error["message"]
