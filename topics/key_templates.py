"""Keys from a run's placeholders: a concurrency key or a rate-limit key may name
``{schedule_id}`` and ``{args.NAME}`` (docs/DESIGN.md §8.2, §8.5).

``"concurrency": {"key": "invoice-{args.customer}", "limit": 1}`` gives each customer
its own key; ``"key": "{schedule_id}"`` one key per schedule (at most ``limit`` runs of
the schedule at once, Airflow's ``max_active_runs``, Temporal's overlap policy). In a
DAG task, ``{schedule_id}`` is the DAG's id: one key for all the DAG's tasks that name
it. ``{{`` and ``}}`` are literal braces; any other brace is refused at upsert, with
the targets' one parser (`topics.targets.template_names`).

Only what is the same for every run of a definition may be named: the key decides the
partition a run is written to (murmur2 of the key, `RunBook.place`) and the slots it
counts against, so a key that differs per run (``{scheduled_at}``, ``{attempt}``,
``{run_id}`` ...) would put each run alone under its own limit and limit nothing.
``{args.NAME}`` is a top-level field of the job's args holding text, a whole number or
a boolean (written as JSON writes it: ``true``/``false``); anything else, or a missing
field, is refused naming the field.

The shard renders the key once per definition (`rendered_job`, kept on the shard's
`Definition`, never per fire), and the run record carries the rendered key: a worker
(Python or Go) sees a literal key, as before templates existed. The changelog and
``schedule show`` keep the template; the views show the rendered key beside it. Only
a definition written with `RENDERED_MARK` has templates for keys: one from before keys
had placeholders keeps its braced keys literal (docs/DESIGN.md §8.2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from topics.command_fields import FieldError, clip, describe
from topics.command_types import Job
from topics.concurrency import MAX_KEY_CHARS
from topics.ratelimits import check_key
from topics.targets import PLACEHOLDERS
from topics.templates import render, template_names

SCHEDULE_ID = "schedule_id"
ARGS_PREFIX = "args."
KEY_PLACEHOLDERS = ("{schedule_id}", "{args.NAME}")
# A field of the args a key may name: what the placeholder parser reads as one name.
_ARG_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


RENDERED_MARK = "key_templates"
"""The field of a definition's changelog doc saying its keys are templates: written by
`definition_doc` and `dag_definition_doc` when a key holds a brace (so every other
definition keeps its bytes). A doc without it was written before keys had placeholders,
when ``{schedule_id}``, ``a{{b}}`` or ``x-{args.c}`` were literal keys; its keys stay
literal, as its runs have always carried them."""


def job_marks_templates(job: Job) -> bool:
    """Does a key of ``job`` hold a brace (its definition's doc gets `RENDERED_MARK`)?"""
    return any(
        found is not None and is_template(found.key) for found in (job.concurrency, job.rate_limit)
    )


def renders_keys(doc: Any) -> bool:
    """Are the keys of the definition's changelog doc ``doc`` templates (`RENDERED_MARK`)?"""
    return isinstance(doc, Mapping) and doc.get(RENDERED_MARK) is True


def is_template(key: str) -> bool:
    """Does ``key`` hold a brace (a placeholder or a literal ``{{``/``}}``)?"""
    return "{" in key or "}" in key


def names_schedule_id(key: Any) -> bool:
    """Does the key template ``key`` name ``{schedule_id}``?"""
    return (
        isinstance(key, str)
        and "{" in key
        and any(name == SCHEDULE_ID for _, name in template_names(key))
    )


def check_key_template(key: str, path: str) -> list[str]:
    """The arg names ``key`` reads (``{args.NAME}``); `FieldError` naming ``path`` for
    a brace that is neither doubled nor a key's placeholder, or a per-run placeholder."""
    names: list[str] = []
    for token, name in template_names(key):
        if name == SCHEDULE_ID:
            continue
        if name is not None and name.startswith(ARGS_PREFIX):
            arg = name[len(ARGS_PREFIX) :]
            if _ARG_NAME.fullmatch(arg):
                names.append(arg)
                continue
        if name is not None and name in PLACEHOLDERS:
            raise FieldError(
                f"{path}: {token} differs per run, so every run would have a key of its own"
                f" and the limit would limit nothing; a key may name"
                f" {' or '.join(KEY_PLACEHOLDERS)}"
            )
        raise FieldError(
            f"{path}: {clip(token)} in {describe(key)} is no placeholder of a key; known:"
            f" {', '.join(KEY_PLACEHOLDERS)} (NAME a top-level field of job.args);"
            " write {{ or }} for a literal brace"
        )
    return names


def check_key_args(names: list[str], args: Mapping[str, Any], path: str) -> None:
    """`FieldError` naming ``job.args.NAME`` unless each named field holds text, a whole
    number or a boolean (``path``: the job's path, ``job`` or ``tasks.T.job``)."""
    for name in names:
        if name not in args:
            raise FieldError(
                f"{path}.args.{name}: missing; the key names {{args.{name}}}, so the job's"
                " args must hold it (text, a whole number or a boolean)"
            )
        value = args[name]
        if not isinstance(value, str | int) or isinstance(value, float):
            raise FieldError(
                f"{path}.args.{name}: {describe(value)} cannot be part of a key (named by"
                f" {{args.{name}}}); give text, a whole number or a boolean"
            )


def arg_text(value: Any) -> str:
    """An arg's value as a key spells it: text as is, booleans as JSON writes them."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def render_key(key: str, schedule_id: str, args: Mapping[str, Any]) -> str:
    """``key`` with its placeholders replaced (checked by `check_key_template` and
    `check_key_args` first)."""
    if not is_template(key):
        return key

    def value(name: str) -> str:
        if name == SCHEDULE_ID:
            return schedule_id
        return arg_text(args[name[len(ARGS_PREFIX) :]])

    return render(key, value)


def rendered_job(job: Job, schedule_id: str, templates: bool = True) -> Job:
    """``job`` as its run records carry it: its concurrency and rate-limit keys rendered
    for ``schedule_id``; ``job`` itself when neither key is a template (the herd's case:
    nothing is built), or when its definition was written before keys were templates
    (``templates`` False: a doc without `RENDERED_MARK`)."""
    concurrency, rate_limit = job.concurrency, job.rate_limit
    if not templates or (concurrency is None and rate_limit is None):
        return job
    keyed = concurrency is not None and is_template(concurrency.key)
    rated = rate_limit is not None and is_template(rate_limit.key)
    if not keyed and not rated:
        return job
    args = job.args
    if concurrency is not None and keyed:
        key = _rendered_or_kept(concurrency.key, schedule_id, args, rate=False)
        concurrency = replace(concurrency, key=key)
    if rate_limit is not None and rated:
        key = _rendered_or_kept(rate_limit.key, schedule_id, args, rate=True)
        rate_limit = replace(rate_limit, key=key)
    return replace(job, concurrency=concurrency, rate_limit=rate_limit)


def _rendered_or_kept(key: str, schedule_id: str, args: Mapping[str, Any], *, rate: bool) -> str:
    """``key`` rendered; or the key as it was (literal) when it does not render to a
    key a worker takes: the upsert refused such a key, so only a changelog of another
    version can hold one, and a literal key is one its runs could always carry."""
    try:
        rendered = _rendered(key, schedule_id, args, "key", "job")
        check_rendered_key(rendered, "key", rate=rate)
    except FieldError:
        return key
    return rendered


def check_rendered_key(key: str, field: str, *, rate: bool) -> None:
    """`FieldError` naming ``field`` unless ``key``, rendered, is a key a worker's
    decoder takes: at most `MAX_KEY_CHARS` printable characters; for a rate-limit key
    no ``@`` or ``/`` either (`topics.ratelimits.check_key`)."""
    if rate:
        check_key(key, field)
    elif len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise FieldError(
            f"{field}: renders to {describe(key)}, which is not a key: at most"
            f" {MAX_KEY_CHARS} printable characters (look at the args it names)"
        )


def check_job_keys(job: Job, schedule_id: str, path: str) -> None:
    """At upsert: `FieldError` naming the field unless each templated key of ``job``
    names only a key's placeholders, its args hold what it names, and the key it renders
    to for ``schedule_id`` is a valid literal key (as a worker will check it)."""
    if job.concurrency is not None and is_template(job.concurrency.key):
        field = f"{path}.concurrency.key"
        key = _rendered(job.concurrency.key, schedule_id, job.args, field, path)
        check_rendered_key(key, field, rate=False)
    if job.rate_limit is not None and is_template(job.rate_limit.key):
        field = f"{path}.rate_limit.key"
        key = _rendered(job.rate_limit.key, schedule_id, job.args, field, path)
        try:
            check_rendered_key(key, field, rate=True)
        except FieldError as error:
            raise FieldError(f"{error} (rendered from {describe(job.rate_limit.key)})") from None


def _rendered(key: str, schedule_id: str, args: Mapping[str, Any], field: str, path: str) -> str:
    check_key_args(check_key_template(key, field), args, path)
    return render_key(key, schedule_id, args)


def rendered_key_of(wire: Any, schedule_id: str, args: Any, templates: bool) -> str | None:
    """The rendered key of a concurrency or rate-limit object as a changelog keeps it
    (``{"key": TEMPLATE, ...}``), for the views, as `rendered_job` renders it; None when
    its key is no template, its definition's doc has no `RENDERED_MARK` (``templates``
    False: the key is literal), or it renders to no key (kept literal too)."""
    if not templates or not isinstance(wire, Mapping):
        return None
    key = wire.get("key")
    if not isinstance(key, str) or not is_template(key):
        return None
    given = args if isinstance(args, Mapping) else {}
    rendered = _rendered_or_kept(key, schedule_id, given, rate="per_s" in wire)
    return None if rendered == key else rendered
