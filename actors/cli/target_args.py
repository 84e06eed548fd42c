"""`kafkron schedule add`'s target flags: a Kafka record or an HTTP call instead of a job.

``--to-topic T --value JSON [--key K] [--header NAME=VALUE ...] [--raw-value-file F]``
builds a `KafkaTarget`; ``--http-post URL [--body JSON] [--http-method M]
[--http-header NAME=VALUE|NAME=secret:NAME ...] [--http-timeout-s N]`` an `HttpTarget`.
The command is built by the one builder of commands, so the shard's own rules judge
it; a rejection names a field of the command (``target.kafka.topic``), which
`flag_of` turns back into the flag the person typed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from topics import codec
from topics.command_parts import HttpTarget, KafkaTarget

_SECRET_PREFIX = "secret:"

# The command's field (a rejection's path prefix) -> the flag that set it. Longest first.
_FLAGS: tuple[tuple[str, str], ...] = (
    ("target.kafka.topic", "--to-topic"),
    ("target.kafka.key", "--key"),
    ("target.kafka.value", "--value"),
    ("target.kafka.headers", "--header"),
    ("target.http.url", "--http-post"),
    ("target.http.method", "--http-method"),
    ("target.http.headers", "--http-header"),
    ("target.http.body", "--body"),
    ("target.http.timeout_s", "--http-timeout-s"),
)
_KAFKA_ONLY = ("value", "key", "header", "raw_value_file")
_HTTP_ONLY = ("body", "http_method", "http_header", "http_timeout_s")


def add_arguments(parser: argparse.ArgumentParser, what: Any) -> None:
    """The target flags; ``what`` is the group that makes them exclusive with ``--job``."""
    what.add_argument(
        "--to-topic", metavar="T", help="write a record to topic T at each occurrence"
    )
    what.add_argument("--http-post", metavar="URL", help="call URL at each occurrence")
    kafka = parser.add_argument_group("Kafka target (with --to-topic)")
    kafka.add_argument("--value", metavar="JSON", help="the record's value, any JSON")
    kafka.add_argument("--raw-value-file", metavar="F", help="the value's bytes, from file F")
    kafka.add_argument("--key", metavar="K", help="the record's key (default: none)")
    kafka.add_argument(
        "--header",
        action="append",
        metavar="NAME=VALUE",
        help="an extra record header (repeatable)",
    )
    http = parser.add_argument_group("HTTP target (with --http-post)")
    http.add_argument("--body", metavar="JSON", help="the request body, any JSON")
    http.add_argument("--http-method", metavar="M", help="GET, POST (default), PUT, PATCH, DELETE")
    http.add_argument(
        "--http-header",
        action="append",
        metavar="NAME=VALUE",
        help="a request header; NAME=secret:S sends the worker's secret S (repeatable)",
    )
    http.add_argument("--http-timeout-s", type=int, metavar="N", help="request timeout (10)")


def target_of(args: argparse.Namespace) -> KafkaTarget | HttpTarget | None:
    """The target the flags describe, None for ``--job``; ``ValueError`` naming a flag."""
    given = {name for name in (*_KAFKA_ONLY, *_HTTP_ONLY) if getattr(args, name) is not None}
    if args.to_topic is None:
        _refuse_alone(given & set(_KAFKA_ONLY), "--to-topic")
    if args.http_post is None:
        _refuse_alone(given & set(_HTTP_ONLY), "--http-post")
    if args.to_topic is not None:
        return _kafka(args)
    if args.http_post is not None:
        return HttpTarget(
            args.http_post,
            method=args.http_method,
            headers=_headers(args.http_header, "--http-header", secrets=True),
            body=_json(args.body, "--body"),
            timeout_s=args.http_timeout_s,
        )
    return None


def _kafka(args: argparse.Namespace) -> KafkaTarget:
    if args.value is not None and args.raw_value_file is not None:
        raise ValueError("give --value or --raw-value-file, not both")
    if args.value is None and args.raw_value_file is None:
        raise ValueError("--to-topic needs the record's value: --value JSON or --raw-value-file F")
    raw = None
    if args.raw_value_file is not None:
        try:
            raw = Path(args.raw_value_file).read_bytes()
        except OSError as exc:
            raise ValueError(f"--raw-value-file {args.raw_value_file}: {exc.strerror}") from None
    return KafkaTarget(
        args.to_topic,
        key=args.key,
        value=_json(args.value, "--value"),
        raw=raw,
        headers=_headers(args.header, "--header", secrets=False),
    )


def _refuse_alone(flags: set[str], needs: str) -> None:
    if flags:
        names = ", ".join(sorted("--" + f.replace("_", "-") for f in flags))
        raise ValueError(f"{names} applies to {needs} only")


def _json(text: str | None, flag: str) -> Any:
    if text is None:
        return None
    try:
        return codec.loads(text)
    except ValueError:
        raise ValueError(
            f"{flag} {text!r} is not JSON; quote text as JSON too: '\"text\"' or '{{\"k\": 1}}'"
        ) from None


def _headers(pairs: list[str] | None, flag: str, *, secrets: bool) -> dict[str, Any] | None:
    if not pairs:
        return None
    headers: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} {pair!r}: write NAME=VALUE")
        if secrets and value.startswith(_SECRET_PREFIX):
            headers[name] = {"secret": value[len(_SECRET_PREFIX) :]}
        else:
            headers[name] = value
    return headers


def flag_of(reason: str) -> str:
    """``reason`` (a rejection naming a field) prefixed with the flag that set the field."""
    for path, flag in _FLAGS:
        if reason.startswith(path):
            return f"{flag}: {reason}"
    if reason.startswith("target"):
        return f"--to-topic/--http-post: {reason}"
    return reason
