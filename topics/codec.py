"""The one JSON codec of every topic: orjson, UTF-8, every value carries ``"v": 1``."""

from __future__ import annotations

from typing import Any

import orjson

WIRE_VERSION = 1


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; raises ``orjson.JSONDecodeError`` (a ``ValueError``) on bad input."""
    return orjson.loads(data)
