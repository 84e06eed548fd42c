"""Registered jobs: ``@job("billing.invoice_nightly")`` on a sync or async function.

A job is a function ``(ctx: RunContext, **args)``; ``args`` are the schedule's
``job.args`` (a JSON object). Async functions run on the worker's event loop, plain
functions in its thread pool. A worker imports the modules named by ``--jobs``,
which register their jobs in the process-wide registry as a side effect.

Names starting ``kafkron.`` are kafkron's own (`topics.targets.RESERVED_JOB_PREFIX`):
the carrier jobs of targets, which the worker registers itself with
`Registry.register_builtin`. A built-in job is an async function of the run
record alone that returns its `Outcome` (status, error and the result's
``target``) instead of raising.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from actors.worker.outcome import Outcome
from topics.messages import Run
from topics.targets import RESERVED_JOB_PREFIX

F = TypeVar("F", bound=Callable[..., Any])
BuiltinJob = Callable[[Run], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    func: Callable[..., Any]
    is_async: bool
    builtin: bool = False
    """A `BuiltinJob`: called with the run record, returns its `Outcome`."""
    inline: bool = False
    """A plain function called on the worker's loop, as it is started: no thread, no
    task (``@job(name, inline=True)``, for jobs that return at once)."""


class Registry:
    """Job names to functions. One name, one function."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobSpec] = {}

    def register(self, name: str, func: Callable[..., Any], *, inline: bool = False) -> JobSpec:
        if not name or not isinstance(name, str):
            raise ValueError(f"a job name must be a non-empty string, got {name!r}")
        if name.startswith(RESERVED_JOB_PREFIX):
            raise ValueError(
                f"job {name!r}: names starting {RESERVED_JOB_PREFIX!r} are kafkron's own"
                " (targets); give the job another name"
            )
        is_async = inspect.iscoroutinefunction(func)
        if inline and is_async:
            raise ValueError(
                f"job {name!r}: inline=True is for plain functions that return at once"
                " (an async job already runs on the worker's loop)"
            )
        return self._add(JobSpec(name=name, func=func, is_async=is_async, inline=inline))

    def register_builtin(self, name: str, func: BuiltinJob) -> JobSpec:
        """Register kafkron's own job ``name`` (a target's carrier, ``kafkron.*``)."""
        if not name.startswith(RESERVED_JOB_PREFIX):
            raise ValueError(f"built-in job {name!r} must start {RESERVED_JOB_PREFIX!r}")
        return self._add(JobSpec(name=name, func=func, is_async=True, builtin=True))

    def _add(self, spec: JobSpec) -> JobSpec:
        name, func = spec.name, spec.func
        existing = self._jobs.get(name)
        if existing is not None and existing.func != func:  # == : a bound method is new each time
            raise ValueError(
                f"job {name!r} is already registered by "
                f"{existing.func.__module__}.{existing.func.__qualname__}; "
                "give one of them another name"
            )
        self._jobs[name] = spec
        return spec

    def get(self, name: str) -> JobSpec | None:
        return self._jobs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def names(self) -> list[str]:
        return sorted(self._jobs)


REGISTRY = Registry()
"""The process-wide registry that ``@job`` fills and ``kafkron worker`` runs from."""


def job(name: str, *, inline: bool = False, registry: Registry | None = None) -> Callable[[F], F]:
    """Register the decorated function as the job ``name``; returns it unchanged.

    The function takes a `RunContext` and the schedule's ``job.args`` as keyword
    arguments; it may be ``async`` (run on the worker's loop) or plain (run in its
    thread pool). A worker started with ``--jobs MODULE`` runs the jobs of MODULE.

    ``inline=True`` (plain functions only) runs the job on the worker's loop itself,
    as soon as it is started, with no thread and no task of its own: for jobs that
    return at once (a counter, a record written to memory), whose thread hop would
    cost more than the job. An inline job holds the whole worker while it runs:
    nothing that blocks, waits or takes more than a millisecond belongs there.

    Example::

        @job("billing.fx_rates")
        async def fx_rates(ctx: RunContext, base: str = "EUR") -> None:
            ...
    """

    def decorate(func: F) -> F:
        (registry or REGISTRY).register(name, func, inline=inline)
        return func

    return decorate


def load_job_modules(modules: Iterable[str]) -> Registry:
    """Import each module (so its ``@job``s register) and return the registry.

    Raises ``ImportError`` naming the module when one cannot be imported.
    """
    for module in modules:
        module = module.strip()
        if not module:
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"cannot import job module {module!r}: {exc}; "
                "pass an importable module path such as actors.examples.billing.jobs"
            ) from exc
    return REGISTRY
