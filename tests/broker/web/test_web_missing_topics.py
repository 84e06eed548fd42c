"""The console on a namespace whose topics do not exist says so on the pages that read them.

The dead-letter and rejected pages read the recorder's database only: they answer as
they do without one (a page saying there is no history yet), never a 500.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.web.app import Console, WebOptions
from topics.names import Settings

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("path", ["/", "/schedules/nightly"])
async def test_a_namespace_without_topics_gets_a_page_naming_the_command_that_creates_them(
    tmp_path: Path, path: str
) -> None:
    namespace = f"absent-{uuid.uuid4().hex[:8]}"
    console = Console(Settings.from_env(namespace=namespace), WebOptions(db=tmp_path / "h.db"))
    async with TestClient(TestServer(console.app())) as client:
        response = await client.get(path)
        page = await response.text()
    assert response.status == 503, page[:500]
    assert f"{namespace}." in page and "kafkron topics create" in page


async def test_the_pages_that_read_only_the_history_answer_without_topics(tmp_path: Path) -> None:
    console = Console(
        Settings.from_env(namespace=f"absent-{uuid.uuid4().hex[:8]}"),
        WebOptions(db=tmp_path / "h.db"),
    )
    async with TestClient(TestServer(console.app())) as client:
        for path in ("/dlq", "/rejected"):
            response = await client.get(path)
            assert response.status == 200, path
            assert "kafkron recorder" in await response.text()
