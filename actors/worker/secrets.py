"""Named secrets of HTTP targets, resolved by the worker when it sends.

A target's header says ``{"secret": "billing-api"}``; the value lives only on the
workers: in the file of ``--secrets FILE`` (a JSON object of names to strings, or
``NAME=VALUE`` lines with ``#`` comments), else in the environment variable
``KAFKRON_SECRET_BILLING_API`` (the name upper-cased, every character but letters
and digits turned into ``_``). So a secret is never on a topic, in the changelog,
a dead letter or the history.

The file is read again when it changes (its size or modification time), so a
rotated secret is used from the next request on without a restart. Values are
never put in an exception, a log line or a result: a missing secret is named, and
`Secrets.redact` replaces any value that a server echoes back in its response.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

import orjson

log = logging.getLogger("kafkron.worker")

ENV_PREFIX = "KAFKRON_SECRET_"
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


class SecretError(Exception):
    """A secret cannot be used (missing, unreadable file, a value no header can carry);
    the message names the secret and never holds its value."""


def env_name(name: str) -> str:
    """The environment variable of secret ``name``: ``billing-api`` ->
    ``KAFKRON_SECRET_BILLING_API``."""
    return ENV_PREFIX + _NOT_ALNUM.sub("_", name).upper()


def parse_secrets(text: str, source: str) -> dict[str, str]:
    """Name -> value from a secrets file's text: a JSON object of strings, or
    ``NAME=VALUE`` lines (blank lines and ``#`` comments skipped, the value taken
    as written after the first ``=``). `SecretError` naming the line, never a value."""
    if text.lstrip().startswith("{"):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise SecretError(f"{source}: not valid JSON") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise SecretError(f"{source}: expected a JSON object of names to strings")
        return dict(data)
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, equals, value = stripped.partition("=")
        if not equals or not name.strip():
            raise SecretError(f"{source} line {number}: expected NAME=VALUE")
        found[name.strip()] = value
    return found


class Secrets:
    """The worker's secrets: a file (optional) first, then the environment."""

    def __init__(
        self, path: str | Path | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self._path = None if path is None else Path(path)
        self._environ = os.environ if environ is None else environ
        self._stamp: tuple[int, int] | None = None
        self._values: dict[str, str] = {}
        if self._path is not None:
            self._load()  # fail at start, not at the first send, on a bad file
            self._warn_if_open()

    def _load(self) -> None:
        assert self._path is not None
        try:
            info = self._path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
            if stamp == self._stamp:
                return
            text = self._path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SecretError(f"secrets file {self._path}: {exc.strerror or exc}") from None
        self._values = parse_secrets(text, f"secrets file {self._path}")
        self._stamp = stamp

    def _warn_if_open(self) -> None:
        assert self._path is not None
        mode = stat.S_IMODE(self._path.stat().st_mode)
        if mode & 0o077:
            log.warning(
                "secrets file %s has mode %03o: others on this host can read it; chmod 600 it",
                self._path,
                mode,
            )

    def resolve(self, name: str) -> str:
        """The value of secret ``name``; `SecretError` naming it when it has none."""
        value = None
        if self._path is not None:
            self._load()
            value = self._values.get(name)
        if value is None:
            value = self._environ.get(env_name(name))
        if value is None:
            where = f"in {self._path} nor " if self._path is not None else ""
            raise SecretError(
                f"secret {name!r} is not set {where}in the environment ({env_name(name)})"
                " of this worker"
            )
        if "\r" in value or "\n" in value:
            raise SecretError(f"secret {name!r} holds a line break; a header cannot carry it")
        return value

    @staticmethod
    def redact(text: str, values: Iterable[str]) -> str:
        """``text`` with every occurrence of each of ``values`` replaced by a mark."""
        for value in values:
            if len(value) >= 4:  # shorter ones would mark every "a" of a response
                text = text.replace(value, "[secret]")
        return text
