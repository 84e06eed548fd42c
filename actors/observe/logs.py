"""The one logging setup of every kafkron process.

What a person running kafkron reads is kafkron's own lines (loggers under
``kafkron.``): one line per event they care about, a shard taken, restored,
fenced or released, the clock held back, a run dead-lettered, a command
rejected. The Kafka client logs what *it* cares about, often at ERROR: a
``NotLeaderForPartitionError`` while a new topic's leader settles, a refused
reconnect while the broker restarts. Those are retried by the client and, when
they matter, reported by our runtime in its own words (a failed transaction, a
lost shard). So foreign records are demoted to DEBUG: hidden unless
``--verbose``, and then shown with their original level name.

Formats: ``text`` (a timestamp, the level, the logger, the message) or ``json``
(one object per line: ``ts`` in UTC ISO-8601 with milliseconds, ``level``,
``logger``, ``msg``, ``pid``, and ``exc`` with the traceback when there is one),
for log shippers that parse lines.

``KAFKRON_LOG_FORMAT`` is the default of ``--log-format``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import IO, Literal

import orjson

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
OWN_PREFIX = "kafkron"
ENV_FORMAT = "KAFKRON_LOG_FORMAT"

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def default_format() -> str:
    return os.environ.get(ENV_FORMAT, "text")


def check_format(value: str) -> LogFormat:
    """``value`` as a log format; ``ValueError`` naming the choices otherwise."""
    if value == "text":
        return "text"
    if value == "json":
        return "json"
    raise ValueError(f"log format {value!r} is not one of: text, json (--log-format, {ENV_FORMAT})")


class DemoteForeign(logging.Filter):
    """Lowers every record not from a ``kafkron.`` logger to DEBUG (keeping its name)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != OWN_PREFIX and not record.name.startswith(OWN_PREFIX + "."):
            record.levelno = logging.DEBUG
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        millis = int((record.created - seconds) * 1000)
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


class _LevelGate(logging.Filter):
    """Passes records at ``level`` or above, judged after `DemoteForeign` ran."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self._level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self._level


def setup_logging(
    log_format: LogFormat = "text", *, verbose: bool = False, stream: IO[str] | None = None
) -> logging.Handler:
    """Route every logger to one handler on ``stream`` (stderr); returns the handler.

    Replaces the root logger's handlers, so calling it twice is harmless. Loggers
    are opened to DEBUG at the root and the handler decides: kafkron's INFO and
    above (DEBUG with ``verbose``), foreign records only with ``verbose``.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT_FORMAT))
    if verbose:
        level = logging.DEBUG
    else:
        # Demote first, then gate: a foreign ERROR becomes a DEBUG and stays out.
        handler.addFilter(DemoteForeign())
        level = logging.INFO
    handler.addFilter(_LevelGate(level))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # The Kafka client formats a DEBUG record per request when its logger lets it
    # through; without --verbose nothing of it would be shown, so do not build it.
    logging.getLogger("aiokafka").setLevel(logging.DEBUG if verbose else logging.WARNING)
    return handler


def silence_to_file(
    path: os.PathLike[str] | str, log_format: LogFormat = "text"
) -> logging.Handler:
    """Every log record of this process to ``path`` and none to the terminal.

    For `kafkron demo`, whose terminal belongs to its live view: its own lines
    and the Kafka client's (at WARNING and above) go to a file in its log folder.
    """
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    return handler
