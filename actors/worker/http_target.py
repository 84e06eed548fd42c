"""The HTTP target: the built-in job `topics.targets.HTTP_JOB`, which every worker runs.

One attempt is one request, on the worker's loop (aiohttp's client, the library
the web console already serves with), limited by the target's ``timeout_s``:

- The URL, header values and body strings are rendered from the run record
  (`placeholder_values`) for each attempt; the body, if any, is sent as JSON.
- Every request carries ``Idempotency-Key``, the run's key (the same on every
  attempt and after a crash; a header of the target's own with that name wins),
  and the ``kafkron-run-id``, ``kafkron-schedule-id``, ``kafkron-scheduled-at``
  and ``kafkron-attempt`` headers a Kafka target's record carries.
- Secret headers are resolved now (`actors.worker.secrets`); no value leaves this
  function but in the request.
- The egress rule (`actors.worker.egress`) is applied to the address connected
  to: an IP in the URL is checked here, a name by the connector's resolver, which
  checks every address of the answer and returns exactly those to connect to.
  aiohttp keeps the name for the ``Host`` header and TLS's SNI and certificate
  check. No DNS cache, no proxy from the environment, no redirect followed.
- The response decides the outcome (`actors.worker.http_status`); the result's
  ``target`` holds the status, the attempt's duration and the response body's
  first KiB as text.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from actors.worker.core import Outcome
from actors.worker.egress import EgressRefused, EgressRule
from actors.worker.http_status import (
    CONNECTION_TYPE,
    TIMEOUT_TYPE,
    final,
    retried,
    status_error,
)
from actors.worker.secrets import SecretError, Secrets
from topics.closing import bounded
from topics.messages import Run
from topics.targets import (
    ATTEMPT_HEADER,
    RUN_ID_HEADER,
    SCHEDULE_ID_HEADER,
    SCHEDULED_AT_HEADER,
)
from topics.templates import render, render_json
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

BODY_EXCERPT_BYTES = 1024
IDEMPOTENCY_HEADER = "Idempotency-Key"
USER_AGENT = "kafkron"


def placeholder_values(run: Run) -> Callable[[str], str]:
    """The values of `topics.targets.PLACEHOLDERS` for one attempt of ``run``. The
    logical date and the data interval are the run's (a DAG task's); for a plain
    schedule the run record has neither, and each is the occurrence itself."""
    scheduled = format_ms(run.scheduled_ms)
    start_ms, end_ms = run.data_interval or (run.scheduled_ms, run.scheduled_ms)
    logical_ms = run.logical_date_ms if run.logical_date_ms is not None else start_ms
    values = {
        "run_id": run.run_id,
        "schedule_id": run.schedule_id,
        "scheduled_at": scheduled,
        "fired_at": format_ms(run.fired_ms),
        "attempt": str(run.attempt),
        "idempotency_key": run.idempotency_key,
        "logical_date": format_ms(logical_ms),
        "data_interval_start": format_ms(start_ms),
        "data_interval_end": format_ms(end_ms),
    }
    return values.__getitem__


class _CheckedResolver(AbstractResolver):
    """The system resolver, with every address of an answer checked by the rule."""

    def __init__(self, rule: EgressRule) -> None:
        self._rule = rule
        self._inner = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        if not self._rule.allows_host(host):
            # Every address, not only the first: the connector tries them in turn.
            for answer in answers:
                self._rule.check(answer["host"], host)
        return answers

    async def close(self) -> None:
        await bounded(self._inner.close(), "closing the HTTP targets' resolver")


class HttpTargets:
    """Sends HTTP targets' requests; ``send`` is the built-in job `HTTP_JOB`."""

    def __init__(self, rule: EgressRule, secrets: Secrets) -> None:
        self.rule = rule
        self._secrets = secrets
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=_CheckedResolver(self.rule), use_dns_cache=False
            )
            # trust_env off: an HTTP(S)_PROXY of the worker's environment would
            # connect to the proxy, an address the rule never saw.
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await bounded(session.close(), "closing the HTTP targets' connections")

    async def send(self, run: Run) -> Outcome:
        """One attempt of ``run``'s HTTP target, as its outcome."""
        args = run.job.args
        values = placeholder_values(run)
        method = str(args.get("method") or "POST")
        url = render(str(args["url"]), values)
        request = f"{method} {url}"
        used: list[str] = []  # the secret values of this request, kept out of the result
        try:
            self._check_literal(url)
            headers = self._headers(run, args.get("headers") or {}, values, used)
        except (EgressRefused, SecretError, ValueError) as exc:
            kind = {EgressRefused: "EgressRefused", SecretError: "SecretError"}
            return _failed(final(kind.get(type(exc), "InvalidTarget"), str(exc)))
        body = args.get("body")
        data = None
        if body is not None:
            data = orjson.dumps(render_json(body, values))
            if not any(name.lower() == "content-type" for name in headers):
                headers["Content-Type"] = "application/json"
        timeout_s = float(args.get("timeout_s") or 10)
        started = time.perf_counter()
        status: int | None = None
        excerpt = b""
        try:
            async with self._client().request(
                method,
                url,
                headers=headers,
                data=data,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                status = response.status
                excerpt = await _excerpt(response.content)
                error = status_error(
                    status,
                    response.reason or "",
                    request,
                    location=response.headers.get("Location"),
                    retry_after=response.headers.get("Retry-After"),
                    now_s=time.time(),
                )
        except EgressRefused as exc:
            return _failed(final("EgressRefused", str(exc)))
        except TimeoutError:  # aiohttp's own timeouts are TimeoutErrors too
            error = retried(TIMEOUT_TYPE, f"no answer from {request} within {timeout_s:g} s")
        except (aiohttp.InvalidURL, ValueError) as exc:
            return _failed(final("InvalidTarget", f"{request}: {exc}"))
        except (aiohttp.ClientError, OSError) as exc:
            error = retried(CONNECTION_TYPE, f"{request}: {type(exc).__name__}: {exc}")
        duration_ms = round((time.perf_counter() - started) * 1000)
        text = excerpt.decode("utf-8", errors="replace")
        target = {
            "http": {
                "status": status,
                "duration_ms": duration_ms,
                "body": Secrets.redact(text, used),
            }
        }
        if error is None:
            return Outcome(RunStatus.SUCCEEDED, None, target)
        error["message"] = Secrets.redact(error["message"], used)
        return Outcome(RunStatus.FAILED, error, target)

    def _check_literal(self, url: str) -> None:
        """Check the URL's host when it is an address: the connector's resolver sees
        names only (aiohttp connects to an address without asking it)."""
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return  # a name: judged address by address when it is resolved
        self.rule.check(address)

    def _headers(
        self,
        run: Run,
        given: Mapping[str, Any],
        values: Callable[[str], str],
        used: list[str],
    ) -> dict[str, str]:
        headers = {
            "User-Agent": USER_AGENT,
            IDEMPOTENCY_HEADER: run.idempotency_key,
            RUN_ID_HEADER: run.run_id,
            SCHEDULE_ID_HEADER: run.schedule_id,
            SCHEDULED_AT_HEADER: format_ms(run.scheduled_ms),
            ATTEMPT_HEADER: str(run.attempt),
        }
        for name, value in given.items():
            for existing in [k for k in headers if k.lower() == name.lower()]:
                del headers[existing]  # the target's own header replaces ours
            if isinstance(value, dict):
                secret = self._secrets.resolve(str(value.get("secret")))
                used.append(secret)
                headers[name] = secret
            else:
                headers[name] = render(str(value), values)
        return headers


async def _excerpt(content: aiohttp.StreamReader) -> bytes:
    """The body's first `BODY_EXCERPT_BYTES`; the rest is never read (a large answer
    costs the worker nothing)."""
    chunks: list[bytes] = []
    size = 0
    while size < BODY_EXCERPT_BYTES:
        chunk = await content.read(BODY_EXCERPT_BYTES - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _failed(error: dict[str, str]) -> Outcome:
    """An attempt that ended before a request was sent (nothing to report of a call)."""
    return Outcome(RunStatus.FAILED, error)
