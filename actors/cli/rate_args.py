"""`kafkron schedule add ... --rate-key KEY --rate-per-s R [--rate-burst B]`: a job's rate
limit (docs/DESIGN.md §8.5), built into a `RateLimit` and judged by the shard's own
decoder with the rest of the command; its errors are named by the flag."""

from __future__ import annotations

import argparse

from topics.ratelimits import DEFAULT_BURST, RateLimit

_FLAGS = {"key": "--rate-key", "per_s": "--rate-per-s", "burst": "--rate-burst"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rate-key",
        metavar="KEY",
        help="at most --rate-per-s starts a second of KEY's runs, across every schedule"
        " and worker (the same key as --concurrency-key, if both are given); KEY may name"
        " {schedule_id} and {args.NAME}, as --concurrency-key",
    )
    parser.add_argument("--rate-per-s", type=float, metavar="R", help="starts a second (decimal)")
    parser.add_argument(
        "--rate-burst",
        type=int,
        metavar="B",
        help=f"starts at once after a quiet while ({DEFAULT_BURST})",
    )


def rate_limit_of(args: argparse.Namespace) -> RateLimit | None:
    """The ``--rate-*`` flags as a `RateLimit`; ValueError if a rate or a burst is given
    without a key, or a key without a rate."""
    key = getattr(args, "rate_key", None)
    per_s, burst = getattr(args, "rate_per_s", None), getattr(args, "rate_burst", None)
    if key is None:
        if per_s is not None or burst is not None:
            raise ValueError("--rate-per-s and --rate-burst need --rate-key")
        return None
    if per_s is None:
        raise ValueError("--rate-key needs --rate-per-s (starts a second, such as 10 or 0.5)")
    return RateLimit(key, per_s, DEFAULT_BURST if burst is None else burst)


def flag_of(field: str) -> str:
    """The flag of a ``job.rate_limit.*`` field the shard's decoder named."""
    return _FLAGS.get(field.rsplit(".", 1)[-1], "--rate-key")
