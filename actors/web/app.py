"""`kafkron web`: the console's routes, its actions and who may take them.

Pages (GET, server-rendered HTML, no JavaScript):

    /                      schedules: spec, zone, next fires (UTC and local), paused,
                           last outcome; Pause / Resume / Trigger
    /schedules/{id}        one schedule: its runs with lateness and duration (charts)
    /runs/{run_id}         one run's attempts with their errors
    /dags/{id}?run=RUN_ID  a DAG run drawn as a graph with the state of each task
    /dlq                   dead letters, each with Replay
    /rejected              rejected commands and why
    /next?spec=&tz=&n=     "when will it run?": the `kafkron next` answer and its DST rule
    /keys                  runs in flight by queue and by concurrency or rate-limit key

Actions (POST ``/actions/{pause|resume|trigger|replay}``) produce the same command
the command line would (``schedule.pause``, ..., ``dlq.replay``), validated by the
same `encode`, to ``{ns}.commands``, then redirect back to the page with a note.
The console holds no state: what an action changes shows once the shard wrote it
to the changelog (or the recorder to the history).

Who may act: with a token (``--token`` or ``KAFKRON_WEB_TOKEN``) a browser signs
in once at ``/login`` (an HttpOnly, SameSite=Strict cookie), and every action
checks it. Without a token the console only listens on a loopback address
(`kafkron web` refuses another ``--host``), so only this machine's users reach it.
Either way a POST whose ``Origin`` is another site is refused (cross-site forms).
"""

from __future__ import annotations

import asyncio
import hmac
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
import orjson
from aiohttp import web

from actors.display import delivered_text, target_cell
from actors.history.audit import AuditSource
from actors.history.slo import schedule_slos
from actors.history.store import HistoryError
from actors.sending import SendError, send_commands
from actors.timespec import SpecError
from actors.views.alerts import OpenAlert
from actors.views.backfill_status import backfill_json
from actors.views.dag_view import (
    ViewError,
    counts_text,
    dag_view,
    deadline_text,
    result_query,
)
from actors.views.tail import TailError
from actors.web import data
from actors.web.drawing import bar_chart, dag_graph
from topics.command_builders import (
    CommandRecord,
    dlq_replay,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
)
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

TOKEN_COOKIE = "kafkron_token"
RUNS_SHOWN = 30
NEXT_MAX = 50
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_ACTIONS = {
    "pause": "schedule.pause",
    "resume": "schedule.resume",
    "trigger": "schedule.trigger",
    "replay": "dlq.replay",
}
_BUILDERS: dict[str, Callable[[str], CommandRecord]] = {
    "schedule.pause": schedule_pause,
    "schedule.resume": schedule_resume,
    "schedule.trigger": schedule_trigger,
    "dlq.replay": dlq_replay,
}


@dataclass(frozen=True, slots=True)
class WebOptions:
    db: Path
    token: str | None = None


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("actors.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["instant"] = lambda ms: "-" if ms is None else format_ms(int(ms))
    env.filters["ms"] = lambda ms: "-" if ms is None else _duration(int(ms))
    env.filters["q"] = lambda text: quote(str(text), safe="")
    env.filters["dag_deadline"] = deadline_text
    # A target shows where it goes and what it did, as in `kafkron history`.
    env.filters["target"] = lambda run: target_cell(run.job_target, run.target)
    env.filters["delivered"] = lambda text: delivered_text(
        None if text is None else orjson.loads(text)
    )
    return env


def _duration(ms: int) -> str:
    if abs(ms) < 1_000:
        return f"{ms} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


class Console:
    def __init__(self, settings: Settings, options: WebOptions) -> None:
        self.settings = settings
        self.options = options
        self.changelog = data.Changelog(settings)
        self.history = data.History(options.db, settings.namespace)
        self._templates = _env()

    # --- plumbing -------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self.schedules)
        app.router.add_get("/schedules/{id}", self.schedule)
        app.router.add_get("/runs/{run_id:.+}", self.run)
        app.router.add_get("/dags/{id}", self.dag)
        app.router.add_get("/dlq", self.dlq)
        app.router.add_get("/rejected", self.rejected)
        app.router.add_get("/alerts", self.alerts)
        app.router.add_get("/keys", self.keys)
        app.router.add_get("/next", self.next)
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_post("/actions/{action}", self.action)
        return app

    def render(
        self, request: web.Request, name: str, status: int = 200, **context: Any
    ) -> web.Response:
        page = self._templates.get_template(name).render(
            ns=self.settings.namespace,
            sent=request.query.get("sent"),
            failed=request.query.get("failed"),
            here=request.path_qs,
            can_act=self._may_act(request),
            token_mode=self.options.token is not None,
            **context,
        )
        return web.Response(text=page, content_type="text/html", status=status)

    def _may_act(self, request: web.Request) -> bool:
        token = self.options.token
        if token is None:
            return True
        given = request.cookies.get(TOKEN_COOKIE, "")
        return hmac.compare_digest(given.encode(), token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if origin and origin != "null" and urlsplit(origin).netloc != request.host:
                raise web.HTTPForbidden(text="cross-site form refused: use the console itself")
            if request.path != "/login" and not self._may_act(request):
                raise web.HTTPForbidden(text="sign in with the console's token at /login first")
        try:
            return await handler(request)
        except TailError as exc:
            # A namespace whose topics do not exist (yet): a page that says which and
            # how to create them, not a bare 500.
            return self.render(
                request, "missing.html", status=503, what="topics to read", hint=str(exc)
            )

    async def _history_or_none(self) -> tuple[Any, str | None]:
        try:
            return await self.history.open(), None
        except HistoryError as exc:
            return None, str(exc)

    # --- pages ----------------------------------------------------------------------

    async def schedules(self, request: web.Request) -> web.Response:
        queues = await data.worker_queues(self.settings)
        unserved = {q.queue for q in queues if q.workers == 0}
        pauses = await data.rate_pauses(self.settings)
        rows = await data.schedule_rows(self.changelog, unserved, pauses)
        latest: dict[str, Any] = {}
        store, history_error = await self._history_or_none()
        if store is not None:
            async with store:
                for view in await store.latest_per_schedule():
                    if view.task is None:
                        latest[view.schedule_id] = view
        return self.render(
            request,
            "schedules.html",
            rows=rows,
            queues=queues,
            pauses=sorted(pauses.items()),
            now_ms=time.time_ns() // 1_000_000,
            latest=latest,
            history_error=history_error,
            topic=self.settings.topic(TopicKind.SCHEDULES),
        )

    async def schedule(self, request: web.Request) -> web.Response:
        schedule_id = request.match_info["id"]
        state = await self.changelog.state(schedule_id)
        row = None
        definition: dict[str, Any] = {}
        backfill = None
        if state is not None:
            row = data.row_of(state)
            definition = orjson.loads(state.def_bytes)
            if state.backfill is not None:  # docs/DESIGN.md §6.9
                backfill = backfill_json(state, int(time.time() * 1000))
        store, history_error = await self._history_or_none()
        runs: list[Any] = []
        slo_line = None
        if store is not None:
            async with store:
                runs = await store.runs(schedule_id=schedule_id, limit=RUNS_SHOWN)
            slo_line = await asyncio.to_thread(self._slo_line, schedule_id)
        if state is None and not runs:
            return self.render(
                request, "missing.html", status=404, what=f"schedule {schedule_id!r}",
                hint="it is not in the changelog (deleted, or never created) and has no runs",
            )  # fmt: skip
        oldest_first = list(reversed(runs))
        labels = [format_ms(r.scheduled_ms) if r.scheduled_ms else r.run_id for r in oldest_first]
        charts = [
            bar_chart("firing lateness", [r.lateness_ms for r in oldest_first], labels),
            bar_chart("duration", [r.duration_ms for r in oldest_first], labels),
        ]
        return self.render(
            request,
            "schedule.html",
            schedule_id=schedule_id,
            row=row,
            definition=orjson.dumps(definition, option=orjson.OPT_INDENT_2).decode(),
            dst=data.dst_rule(definition.get("spec", {}), definition.get("dst"))
            if definition
            else None,
            runs=runs,
            charts=charts if runs else [],
            history_error=history_error,
            backfill=backfill,
            slo=slo_line,
        )

    def _slo_line(self, schedule_id: str) -> str | None:
        """The schedule's SLO over the last day (`actors.history.slo`), as `kafkron slo`
        prints it; None when the history cannot say (an older database)."""
        now_ms = time.time_ns() // 1_000_000
        try:
            with AuditSource(self.history.path) as source:
                [one], _ = schedule_slos(
                    source, [schedule_id], now_ms - SLO_WINDOW_MS, now_ms - SLO_SETTLE_MS, None
                )
        except (HistoryError, sqlite3.Error):
            return None
        return one.text()

    async def keys(self, request: web.Request) -> web.Response:
        view, history_error = await data.flow_view(self.history, self.settings)
        return self.render(request, "keys.html", view=view, history_error=history_error)

    async def run(self, request: web.Request) -> web.Response:
        run_id = request.match_info["run_id"]
        store, history_error = await self._history_or_none()
        if store is None:
            return self.render(
                request, "missing.html", status=404, what="history", hint=history_error
            )
        async with store:
            view = await store.run(run_id)
            attempts = await store.attempts(run_id)
        if view is None:
            return self.render(
                request, "missing.html", status=404, what=f"run {run_id!r}",
                hint="the recorder has not seen it (yet)",
            )  # fmt: skip
        dag_run_id = None
        if view.task is not None:
            dag_run_id = run_id.rsplit("/", 1)[0]
        return self.render(request, "run.html", run=view, attempts=attempts, dag_run_id=dag_run_id)

    async def dag(self, request: web.Request) -> web.Response:
        dag_id = request.match_info["id"]
        state = await self.changelog.state(dag_id)
        if state is None:
            return self.render(
                request, "missing.html", status=404, what=f"DAG {dag_id!r}",
                hint="it is not in the changelog",
            )  # fmt: skip
        run_id = request.query.get("run") or None
        try:
            query = result_query(state, run_id)
        except ViewError as exc:
            return self.render(request, "missing.html", status=404, what="DAG run", hint=str(exc))
        result = None
        looked = False
        if query is not None:  # an ended run: its own result, from the history
            store, _ = await self._history_or_none()
            if store is not None:
                looked = True
                async with store:
                    result = data.dag_run_result(await store.attempts(query.run_id), query.attempt)
        view = dag_view(state, run_id, result=result, looked_for_result=looked)
        counts = None if view.result is None else counts_text(view.result.counts)
        return self.render(request, "dag.html", view=view, graph=dag_graph(view), counts=counts)

    async def dlq(self, request: web.Request) -> web.Response:
        store, history_error = await self._history_or_none()
        letters: list[Any] = []
        run_status: dict[str, str] = {}
        if store is not None:
            async with store:
                letters = await store.dead_letters()
                for letter in letters:
                    view = await store.run(letter.run_id)
                    run_status[letter.run_id] = view.status if view is not None else "-"
        return self.render(
            request, "dlq.html", letters=letters, run_status=run_status, history_error=history_error
        )

    async def rejected(self, request: web.Request) -> web.Response:
        store, history_error = await self._history_or_none()
        rows: list[Any] = []
        if store is not None:
            async with store:
                rows = await store.rejections()
        shown = [
            {
                "at": r.rejected_ms,
                "key": (r.key or b"").decode("utf-8", errors="replace"),
                "reason": r.reason,
                "where": f"{r.original_topic}[{r.original_partition}]@{r.original_offset}",
                "original": (r.original or b"").decode("utf-8", errors="replace")[:400],
            }
            for r in rows
        ]
        return self.render(request, "rejected.html", rows=shown, history_error=history_error)

    async def alerts(self, request: web.Request) -> web.Response:
        """The deadline alerts still open, from the history database's ``alerts``
        table (`actors.history.alerts`), not the whole topic at every request."""
        store, error = await self._history_or_none()
        rows: list[OpenAlert] = []
        if store is not None:
            now_ms = time.time_ns() // 1_000_000
            async with store:
                rows = [OpenAlert(a, now_ms - a.due_ms) for a in await store.alerts(open_only=True)]
        return self.render(request, "alerts.html", rows=rows, error=error)

    async def next(self, request: web.Request) -> web.Response:
        spec = request.query.get("spec", "").strip()
        tz = request.query.get("tz", "").strip() or None
        count_text = request.query.get("n", "5")
        fires: list[data.Fire] = []
        rule = None
        error = None
        if spec:
            try:
                count = int(count_text)
                if not 1 <= count <= NEXT_MAX:
                    raise ValueError(f"n: between 1 and {NEXT_MAX}")
                calendars = await data.calendars_named_by(spec, self.settings)
                fires, rule = data.when_will_it_run(
                    spec, tz, count, time.time_ns() // 1_000_000, calendars
                )
            except (SpecError, ValueError, KeyError, TailError) as exc:
                error = str(exc)
        return self.render(
            request,
            "next.html",
            spec=spec,
            tz=tz or "",
            n=count_text,
            fires=fires,
            rule=rule,
            error=error,
            status=400 if error else 200,
        )

    # --- sign-in and actions ---------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.Response:
        return self.render(request, "login.html", error=None)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = self.options.token
        given = str(form.get("token", ""))
        if token is None or not hmac.compare_digest(given.encode(), token.encode()):
            return self.render(request, "login.html", status=403, error="wrong token")
        response = web.HTTPSeeOther("/")
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    async def action(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["action"]
        kind = _ACTIONS.get(name)
        if kind is None:
            raise web.HTTPNotFound(text=f"no action {name!r}; actions: {', '.join(_ACTIONS)}")
        form = await request.post()
        back = _local_path(str(form.get("next", "/")))
        field = "run_id" if kind == "dlq.replay" else "id"
        subject = str(form.get(field, ""))
        try:  # built and checked by the one builder of commands, as the CLI's
            record = _BUILDERS[kind](subject)
            await send_commands(self.settings, [(record.key, record.value)])
        except (ValueError, SendError) as exc:
            raise web.HTTPSeeOther(_with_note(back, "failed", f"{kind}: {exc}")) from None
        self.changelog.forget()
        raise web.HTTPSeeOther(_with_note(back, "sent", f"{kind} {subject}"))


def _local_path(path: str) -> str:
    """``path`` if it is a path of this console, else ``/`` (no open redirect)."""
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//"):
        return "/"
    return parts.path


def _with_note(path: str, key: str, text: str) -> str:
    return f"{path}?{key}={quote(text, safe='')}"


# The schedule page's SLO: the last day, less the minute a run may still be on its way.
SLO_WINDOW_MS = 24 * 3600 * 1000
SLO_SETTLE_MS = 60 * 1000
