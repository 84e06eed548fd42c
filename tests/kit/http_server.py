"""A small HTTP/1.1 server on 127.0.0.1 for the HTTP target tests, on asyncio alone
(no HTTP library: the server must not share the client's code).

It answers as an idempotent API does. Each path has a script of replies, taken one
per new request; a request whose ``Idempotency-Key`` already got a 2xx gets that
reply again, at once, without taking a new one. A 2xx counts as *applied* for its key when it
is taken, before any delay, as a server that commits first and answers slowly: a
client that gives up waiting (a timeout, a killed worker) and asks again with the
same key finds the effect done, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    """Wait this long before answering (the connection may be gone by then)."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Names in lower case."""
    body: bytes
    at: float = field(default_factory=time.time)

    @property
    def key(self) -> str | None:
        return self.headers.get("idempotency-key")


_REASONS = {200: "OK", 301: "Moved Permanently", 404: "Not Found", 429: "Too Many Requests"}


class TargetServer:
    """``async with TargetServer({"/flaky": [Reply(500), Reply(200)]}) as server``; a
    script's last reply repeats, a path without one answers 200 "ok"."""

    def __init__(self, scripts: dict[str, list[Reply]] | None = None) -> None:
        self._scripts = {path: list(replies) for path, replies in (scripts or {}).items()}
        self.requests: list[Request] = []
        self.applied: Counter[str] = Counter()
        """Idempotency key -> 2xx replies taken for it (never more than one)."""
        self._done: dict[str, Reply] = {}
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()
        self.port = 0

    async def __aenter__(self) -> TargetServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        # Connections still in a delay are dropped unanswered (a cancel would make
        # asyncio's stream callback log the CancelledError as an error).
        self._closing.set()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def on(self, path: str) -> list[Request]:
        """The requests to ``path`` (its query aside)."""
        return [r for r in self.requests if r.path.partition("?")[0] == path]

    def _reply_for(self, request: Request) -> Reply:
        key = request.key
        if key is not None and key in self._done:
            done = self._done[key]  # already done: the same answer at once, no new effect
            return Reply(done.status, done.body, done.headers)
        script = self._scripts.get(request.path.partition("?")[0], [])
        reply = script.pop(0) if len(script) > 1 else (script[0] if script else Reply())
        if 200 <= reply.status < 300 and key is not None:
            self._done[key] = reply
            self.applied[key] += 1
        return reply

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Request(method, path, headers, body)
            self.requests.append(request)
            reply = self._reply_for(request)
            if reply.delay_s:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), reply.delay_s)
                if self._closing.is_set():
                    return
            reason = _REASONS.get(reply.status, "Status")
            out = [f"HTTP/1.1 {reply.status} {reason}", f"Content-Length: {len(reply.body)}"]
            out += [f"{name}: {value}" for name, value in reply.headers]
            out.append("Connection: close")
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + reply.body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()
            self._handlers.discard(task)
