"""How a job exited, as the executor saw it: what the worker's core turns into a result.

A module of its own so that a job author's ``import kafkron`` (the ``job`` decorator's
registry names `Outcome` in a built-in job's signature) does not load the worker's
whole state machine, nor does every process that imports ``actors`` (a scheduler
started 0.1 s later for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topics.vocabulary import RunStatus


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job exited, as the executor saw it."""

    status: RunStatus  # one of the core's JOB_STATUSES
    error: Mapping[str, str] | None = None
    target: Mapping[str, Any] | None = None
    """What a target's call did (the result's ``target``: an HTTP target's status,
    duration and body), for a built-in target job; None for a job."""
