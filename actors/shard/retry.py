"""Retry backoff with deterministic full jitter.

The delay before attempt ``n + 1`` of a run, after attempt ``n`` failed, is::

    cap_ms   = min(max_interval_s, initial_s * coefficient ** (k - 1)) * 1000
    delay_ms = floor(cap_ms * u)        jitter "full"   (Brooker's "full jitter")
    delay_ms = floor(cap_ms)            jitter "none"

where ``k`` counts the failed attempts of the current attempt series (1 for the
first failure; a ``dlq.replay`` starts a new series, so its backoff starts small
again) and ``u`` in [0, 1) is drawn from ``sha256(run_id, attempt)``. The draw is
a pure function of the run and the absolute attempt number, so a simulation and a
restored shard compute the very same retry instant as the shard that crashed,
while different runs that fail together spread out instead of retrying as a wave.

Which failures are retried at all is also decided here: an error type listed in
``retry.non_retryable`` or named ``NonRetryable`` is final, and so is the last
attempt a policy allows.
"""

from __future__ import annotations

import hashlib

from topics.commands import RetryPolicy
from topics.vocabulary import JitterMode

# An error type every job can raise to say "retrying will not help" without having to
# list it in each schedule's policy.
NON_RETRYABLE_ERROR_TYPE = "NonRetryable"

_TWO_64 = float(1 << 64)


def jitter_fraction(run_id: str, attempt: int) -> float:
    """A uniform draw in [0, 1) that depends only on ``(run_id, attempt)``."""
    digest = hashlib.sha256(f"{run_id}\x00{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _TWO_64


def backoff_ms(policy: RetryPolicy, *, run_id: str, attempt: int, failures_in_series: int) -> int:
    """Milliseconds to wait before the attempt after ``attempt`` (which failed).

    ``failures_in_series`` is ``k`` above (>= 1). Never negative; at most
    ``max_interval_s`` seconds.
    """
    exponent = max(0, failures_in_series - 1)
    try:
        cap_s = min(policy.max_interval_s, policy.initial_s * policy.coefficient**exponent)
    except OverflowError:  # coefficient ** exponent beyond float range: the cap wins
        cap_s = policy.max_interval_s
    cap_ms = max(0.0, cap_s * 1000.0)
    if policy.jitter == JitterMode.NONE:
        return int(cap_ms)
    return int(cap_ms * jitter_fraction(run_id, attempt))


def is_final_failure(
    policy: RetryPolicy, *, error_type: str | None, failures_in_series: int
) -> bool:
    """True when no further attempt may follow this failure."""
    if error_type is not None and (
        error_type == NON_RETRYABLE_ERROR_TYPE or error_type in policy.non_retryable
    ):
        return True
    return failures_in_series >= policy.max_attempts
