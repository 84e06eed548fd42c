"""`kafkron demo`, start to finish.

1. Use the broker at ``KAFKRON_BOOTSTRAP`` if it answers, else start the local one
   (`actors.broker.start`; the first start downloads Kafka's jars and says so).
2. Create the namespace's topics: a fresh ``demo-<hex>`` namespace per run unless
   one is given, so a demo never sees an earlier demo's schedules.
3. Start the recorder, a scheduler and two workers as child processes.
4. Submit the billing example (`catalog`), built by the one builder of commands,
   plus one broken command for the shard to reject.
5. Show the outcome topics live until ``--duration`` passes or Ctrl-C.
6. Stop the scheduler, then the workers, let the recorder read to the end, stop it,
   and print a summary from the history database.

The exit code is 0 when every child ran until asked to stop and the history was
complete; 1 otherwise (the log of a failed child is printed).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from actors import display as output
from actors.demo import catalog
from actors.demo.children import Child, Children
from actors.demo.feed import DemoFeed
from actors.demo.view import LiveView, PlainView, totals_line
from actors.history.recorder import HISTORY_KINDS, caught_up, partitions_of
from actors.history.store import HistoryError, HistoryStore
from actors.observe.logs import silence_to_file
from actors.sending import send_commands
from topics.admin import create_topics
from topics.clients import consumer_kwargs, producer_kwargs
from topics.closing import bounded, stop_producer
from topics.command_builders import CommandRecord
from topics.names import Settings, TopicKind
from topics.records import InRecord

DEMO_PARTITIONS = 3
WORKERS = 2
SCHEDULER_STOP_GRACE_S = 20.0
# Workers drain on SIGTERM: running jobs get WORKER_DRAIN_S, then are abandoned (and
# run again later, at least once); the grace adds room for leaving the group.
WORKER_DRAIN_S = 10.0
WORKER_STOP_GRACE_S = WORKER_DRAIN_S + 15.0
RECORDER_CATCH_UP_S = 30.0
RECORDER_STOP_GRACE_S = 10.0
DEFAULT_WEB_PORT = 8080
WEB_PORT_TRIES = 10


class DemoError(Exception):
    """The demo cannot run; the message says what to do."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    duration_s: float | None = None
    namespace: str | None = None
    db: Path | None = None
    web_port: int | None = DEFAULT_WEB_PORT
    """The console's port on 127.0.0.1 (the next free one of `WEB_PORT_TRIES`); None: none."""


def fresh_namespace() -> str:
    return f"demo-{uuid.uuid4().hex[:8]}"


def ensure_broker(settings: Settings, say: Any) -> None:
    """Reuse the broker at ``settings.bootstrap``, or start the local one there."""
    from actors import broker
    from actors.broker.layout import BrokerLayout
    from actors.broker.probe import answers

    if answers(settings.bootstrap, timeout_s=5.0):
        say(f"using the Kafka broker at {settings.bootstrap}")
        return
    layout = BrokerLayout.resolve()
    if layout.bootstrap != settings.bootstrap:
        raise DemoError(
            f"no Kafka broker answers at KAFKRON_BOOTSTRAP={settings.bootstrap}; start it, "
            "or unset KAFKRON_BOOTSTRAP to let the demo start a local one"
        )
    say(f"starting a local Kafka broker on {layout.bootstrap} (`kafkron broker stop` stops it)")
    try:
        broker.start(layout)
    except broker.BrokerError as exc:
        raise DemoError(f"the local broker did not start: {exc}") from None


def importable(modules: tuple[str, ...], say: Any) -> list[str]:
    """The job modules that import here (so the workers' --jobs will work)."""
    found: list[str] = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            say(f"note: job module {module} is not available ({exc}); its schedules are left out")
            continue
        found.append(module)
    return found


def shard_accepts(command: CommandRecord) -> bool:
    """Whether the shard core applies ``command`` (asked of the real core, in process)."""
    from actors.shard import ShardCore

    core = ShardCore(partition=0, partitions=1, now_ms=int(time.time() * 1000))
    record = InRecord(TopicKind.COMMANDS, 0, 0, command.key, command.value)
    out = core.apply(record, int(time.time() * 1000))
    return not any(r.topic is TopicKind.REJECTED for r in out)


def demo_commands(now_ms: int, say: Any) -> list[tuple[bytes, bytes]]:
    """The catalog's commands whose jobs are registered, as (key, value) records."""
    from actors.worker.registry import REGISTRY

    commands = catalog.schedules(now_ms)
    dag = catalog.dag()
    if shard_accepts(dag):
        commands.append(dag)
    else:
        say("note: this scheduler does not run DAGs yet; nightly-billing is left out")
    records: list[tuple[bytes, bytes]] = []
    for command in commands:
        missing = sorted(n for n in catalog.job_names([command]) if n not in REGISTRY)
        if missing:
            say(f"note: {command.id} left out: no job {', '.join(missing)} registered")
            continue
        records.append((command.key, command.value))
    return records


async def send_broken_command(settings: Settings) -> None:
    producer = AIOKafkaProducer(**producer_kwargs(settings, f"{settings.namespace}-demo"))
    await producer.start()
    try:
        key, value = catalog.BROKEN_COMMAND
        await producer.send_and_wait(settings.topic(TopicKind.COMMANDS), key=key, value=value)
    finally:
        await stop_producer(producer, "stopping the demo's producer")


class Demo:
    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.settings = Settings.from_env(namespace=options.namespace or fresh_namespace())
        ns = self.settings.namespace
        self.db = options.db or Path(".kafkron") / "demo" / f"{ns}.db"
        self.log_dir = self.db.parent / f"{ns}-logs"
        self.feed = DemoFeed()
        self.stop = asyncio.Event()
        self.tty = output.is_terminal()
        self.failed: list[str] = []
        self.console_url: str | None = None

    def say(self, text: str) -> None:
        print(f"kafkron demo: {text}", file=sys.stderr, flush=True)

    async def run(self) -> int:
        # The terminal belongs to the live view: every log line of this process (the
        # Kafka client's retries while a new topic's leader settles included) goes to
        # a file beside the children's logs.
        self.log_dir.mkdir(parents=True, exist_ok=True)
        silence_to_file(self.log_dir / "demo.log")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop.set)
        self.say(
            f"namespace {self.settings.namespace}; history in {self.db}; logs in {self.log_dir}"
        )
        await asyncio.to_thread(ensure_broker, self.settings, self.say)
        await create_topics(self.settings, partitions=DEMO_PARTITIONS)
        modules = importable(catalog.JOB_MODULES, self.say)
        if not modules:
            raise DemoError("no job module imports; reinstall with `pip install -e .`")
        records = demo_commands(int(time.time() * 1000), self.say)
        env = {
            **os.environ,
            "KAFKRON_NAMESPACE": self.settings.namespace,
            "KAFKRON_BOOTSTRAP": self.settings.bootstrap,
            "PYTHONUNBUFFERED": "1",
        }
        children = Children(env=env, log_dir=self.log_dir)
        try:
            children.start("recorder", ["recorder", "--db", str(self.db)])
            children.start("scheduler", ["scheduler"])
            for n in range(1, WORKERS + 1):
                children.start(
                    f"worker-{n}",
                    ["worker", "--jobs", ",".join(modules), "--drain-s", str(WORKER_DRAIN_S)],
                )
            await send_commands(self.settings, records)
            await send_broken_command(self.settings)
            self.say(f"sent {len(records) + 1} commands (one broken on purpose)")
            console = await self.serve_console()
            try:
                await self.watch(children)
                complete = await self.shut_down(children)
            finally:
                if console is not None:
                    await console.cleanup()
        finally:
            await children.stop_all(grace_s=5.0)
        for child in children.children:
            if child.killed:
                self.failed.append(f"{child.name} had to be killed (it ignored SIGTERM)")
        await self.summary(complete)
        return 1 if self.failed or not complete else 0

    async def serve_console(self) -> web.AppRunner | None:
        """Serve `kafkron web` on this demo's namespace and history while the demo runs."""
        from actors.web.serve import start_console

        first = self.options.web_port
        if first is None:
            return None
        for port in range(first, first + WEB_PORT_TRIES):
            try:
                runner = await start_console(self.settings, self.db, "127.0.0.1", port, None)
            except OSError:
                continue
            self.console_url = f"http://127.0.0.1:{port}/"
            self.say(f"web console at {self.console_url} (while the demo runs)")
            return runner
        self.say(
            f"ports {first}-{first + WEB_PORT_TRIES - 1} are taken; no web console"
            " (pick one with --web-port)"
        )
        return None

    async def watch(self, children: Children) -> None:
        consumer = AIOKafkaConsumer(
            **consumer_kwargs(self.settings, f"{self.settings.namespace}-demo-view")
        )
        await consumer.start()
        kinds = {self.settings.topic(kind): kind for kind in HISTORY_KINDS}
        try:
            tps = [TopicPartition(t, p) for t in kinds for p in await partitions_of(consumer, t)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = (
                time.monotonic() + self.options.duration_s if self.options.duration_s else None
            )
            view: LiveView | PlainView = (
                LiveView(self.settings.namespace, self.options.duration_s, self.console_url)
                if self.tty
                else PlainView()
            )
            with view:
                while not self.stop.is_set():
                    if deadline is not None and time.monotonic() >= deadline:
                        break
                    batches = await consumer.getmany(timeout_ms=250)
                    events = []
                    for tp, batch in batches.items():
                        for r in batch:
                            event = self.feed.apply(kinds[tp.topic], r.key, r.value, r.timestamp)
                            if event is not None:
                                events.append(event)
                    events.sort(key=lambda e: e.at_ms)
                    died = children.died()
                    if died:
                        for child in died:
                            self.failed.append(
                                f"{child.name} exited with {child.exit_code}; its log "
                                f"({child.log_path}) ends with:\n{child.log_tail()}"
                            )
                        view.note(f"{', '.join(c.name for c in died)} stopped unexpectedly")
                        break
                    view.show(self.feed, events, "running")
                view.show(self.feed, [], "stopping")
        finally:
            await bounded(consumer.stop(), "stopping the demo's consumer")
        if not self.tty:
            print(totals_line(self.feed), flush=True)

    async def shut_down(self, children: Children) -> bool:
        """Stop in an order that loses nothing; True if the history is complete."""
        self.say("stopping the scheduler, then the workers")
        await children.stop(children.by_prefix("scheduler"), SCHEDULER_STOP_GRACE_S)
        await children.stop(children.by_prefix("worker-"), WORKER_STOP_GRACE_S)
        recorder: list[Child] = children.by_prefix("recorder")
        complete = False
        deadline = time.monotonic() + RECORDER_CATCH_UP_S
        while time.monotonic() < deadline and recorder[0].exit_code is None:
            with contextlib.suppress(HistoryError):
                if self.db.exists():
                    async with await HistoryStore.open(self.db, readonly=True) as store:
                        if await caught_up(self.settings, store):
                            complete = True
                            break
            await asyncio.sleep(0.5)
        if not complete:
            self.failed.append(f"the recorder did not catch up within {RECORDER_CATCH_UP_S:.0f} s")
        await children.stop(recorder, RECORDER_STOP_GRACE_S)
        return complete

    async def summary(self, complete: bool) -> None:
        for problem in self.failed:
            self.say(problem)
        if not self.db.exists():
            return
        async with await HistoryStore.open(self.db, readonly=True) as store:
            counts = await store.status_counts()
            latest = await store.latest_per_schedule()
        total = sum(n for status, n in counts.items() if status != "retried")
        print(
            f"\nhistory: {total} runs: {counts.get('succeeded', 0)} succeeded, "
            f"{counts.get('retried', 0)} retried, {counts.get('dead_lettered', 0)} dead-lettered, "
            f"{counts.get('failed', 0) + counts.get('timed_out', 0)} failed, "
            f"{counts.get('running', 0)} still running" + ("" if complete else " (incomplete)")
        )
        output.print_table(
            ("schedule", "scheduled", "status", "attempts", "lateness", "duration", "error"),
            [
                (
                    v.schedule_id + (f"/{v.task}" if v.task else ""),
                    output.short_instant(v.scheduled_ms),
                    v.status,
                    str(v.attempts),
                    output.duration(v.lateness_ms),
                    output.duration(v.duration_ms),
                    f"{v.error_type}: {v.error_message}" if v.error_type else "",
                )
                for v in latest
            ],
            title="latest run of every schedule",
            status_column="status",
        )
        ns = self.settings.namespace
        print(
            "\nexplore what happened:\n"
            f"  export KAFKRON_NAMESPACE={ns} KAFKRON_HISTORY_DB={self.db}\n"
            "  kafkron history                   # latest run of every schedule\n"
            "  kafkron history charge-expired-card\n"
            "  kafkron history --status dead_lettered\n"
            "  kafkron ls                        # schedules, from the changelog\n"
            "  kafkron rejected                  # the broken command, and why"
        )


async def run_demo(options: DemoOptions) -> int:
    return await Demo(options).run()
