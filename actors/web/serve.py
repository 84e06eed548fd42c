"""Serving the console on the caller's asyncio loop (`kafkron web`; the demo, beside its view)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from topics.names import Settings


async def start_console(
    settings: Settings, db: Path, host: str, port: int, token: str | None
) -> web.AppRunner:
    """Start serving the console (the demo serves it beside its live view); returns the runner."""
    from actors.web.app import Console, WebOptions

    console = Console(settings, WebOptions(db=db, token=token))
    runner = web.AppRunner(console.app(), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
