"""``GET /metrics`` of an actor, served on the actor's own event loop.

prometheus_client's stock server answers from a thread of its own; our
collectors read the runtimes' dicts, which the event loop mutates, so a thread
would read them mid-update. Served by aiohttp on the loop instead, a scrape runs
between two steps of the runtime and reads a consistent state; the lag samplers
can also await the broker before the families are rendered. The text itself is
prometheus_client's (`generate_latest`), never hand-written.

``--metrics-port P`` (or ``KAFKRON_METRICS_PORT``) binds ``0.0.0.0:P``, as
exporters do: the page is read-only.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from actors.observe.lag import Sampler
from actors.observe.metrics import REGISTRY

log = logging.getLogger("kafkron.metrics")

ENV_PORT = "KAFKRON_METRICS_PORT"
BIND_HOST = "0.0.0.0"


class MetricsError(Exception):
    """The metrics endpoint cannot be served; the message says what to do."""


def port_from_env() -> int | None:
    """``KAFKRON_METRICS_PORT`` as a port, None when unset; `MetricsError` when not a port."""
    raw = os.environ.get(ENV_PORT, "").strip()
    if not raw:
        return None
    return check_port(raw, ENV_PORT)


def check_port(raw: str | int, where: str = "--metrics-port") -> int:
    try:
        port = int(raw)
    except ValueError:
        raise MetricsError(f"{where} {raw!r} is not a port number (1-65535)") from None
    if not 0 < port < 65536:
        raise MetricsError(f"{where} {port} is not a port number (1-65535)")
    return port


@contextlib.asynccontextmanager
async def serve_metrics(
    port: int,
    collectors: Sequence[Collector] = (),
    samplers: Sequence[Sampler] = (),
    *,
    host: str = BIND_HOST,
) -> AsyncIterator[str]:
    """Serve ``/metrics`` while the block runs; yields the URL.

    ``collectors`` and ``samplers`` join `REGISTRY` for that time (and leave it
    after, so one process can serve several actors in turn, as the tests do).
    """

    async def metrics(request: web.Request) -> web.Response:
        for sampler in samplers:
            await sampler.refresh()
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def index(request: web.Request) -> web.Response:
        return web.Response(text="kafkron metrics: GET /metrics\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    registered: list[Collector] = []
    try:
        for collector in (*collectors, *samplers):
            REGISTRY.register(collector)
            registered.append(collector)
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            raise MetricsError(
                f"cannot serve metrics on port {port} ({exc.strerror or exc}); pick a free"
                f" one with --metrics-port or {ENV_PORT}"
            ) from None
        url = f"http://{'127.0.0.1' if host == BIND_HOST else host}:{port}/metrics"
        log.info("metrics at %s", url)
        yield url
    finally:
        await runner.cleanup()
        for collector in registered:
            REGISTRY.unregister(collector)
        for sampler in samplers:
            with contextlib.suppress(Exception):
                await sampler.close()
