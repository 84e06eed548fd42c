"""`kafkron scheduler`: run schedule actors (shards) in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from aiokafka.errors import KafkaError
from prometheus_client.registry import Collector

from actors.cli import observe_args, output
from actors.cli.stop_deadline import StopDeadline, run_main
from actors.cli.topics_cmd import guard
from actors.event_loop import add_loop_argument, chosen, loop_kind, new_event_loop
from actors.observe.collectors import SchedulerCollector
from actors.observe.exposition import MetricsError
from actors.observe.lag import LagSampler, Sampler
from actors.observe.queue_age import QueueAgeSampler
from actors.scheduler.runtime import RuntimeOptions, SchedulerRuntime
from actors.scheduler.target_acks import check_deadline
from actors.scheduler.target_table import patterns_from_env
from topics.admin import TopicsError, shard_count
from topics.names import Settings, TopicKind

# Worst case of a stop: the open transaction (commit timeout 15 s, then a 5 s abort),
# the shard tasks (10 s), then the concurrent closes (10 s); under a supervisor's 60 s.
STOP_DEADLINE_S = 45.0

_EPILOG = """\
examples:
  kafkron scheduler
  kafkron scheduler --session-timeout-ms 6000 --heartbeat-ms 2000
  KAFKRON_NAMESPACE=staging kafkron scheduler --figures-interval-s 10

Joins the consumer group {ns}-schedulers on {ns}.commands and {ns}.results.
Partition p assigned to this process = this process owns shard p: it fences any
earlier owner (transactional id {ns}.shard.{p}), restores the shard from
{ns}.schedules[p], then fires what is due, writing runs, the changelog and the
consumed offsets in one transaction per batch. Start several for failover: when
one dies, its shards move after --session-timeout-ms.

SIGTERM or Ctrl-C: finish the open transaction, close the shards, leave the group.
A stop that has not ended 45 s later exits with code 3, logging what each task
was waiting on (as safe as kill -9: fencing settles what it left open).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "scheduler",
        help="run schedule actors: own shards, fire due runs exactly once",
        description="The schedule actor process: shards on Kafka partitions.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = RuntimeOptions()
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=defaults.session_timeout_ms,
        metavar="MS",
        help="how long a silent scheduler keeps its shards"
        f" (default {defaults.session_timeout_ms})",
    )
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=defaults.heartbeat_ms,
        metavar="MS",
        help="group heartbeat interval, at most a third of the session"
        f" (default {defaults.heartbeat_ms})",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=defaults.max_batch,
        metavar="N",
        help="most input records per turn; one transaction per shard per turn"
        f" (default {defaults.max_batch})",
    )
    parser.add_argument(
        "--max-fires-per-turn",
        type=int,
        default=defaults.max_fires_per_turn,
        metavar="N",
        help="most due occurrences a shard fires per transaction; a backlog takes"
        f" several turns, back to back (default {defaults.max_fires_per_turn})",
    )
    parser.add_argument(
        "--skew-bound-ms",
        type=int,
        default=defaults.skew_bound_ms,
        metavar="MS",
        help="hold firing back when the local clock is proven this far ahead of the broker's"
        f" (default {defaults.skew_bound_ms})",
    )
    parser.add_argument(
        "--figures-interval-s",
        type=float,
        default=defaults.figures_interval_s,
        metavar="S",
        help="log per-shard figures this often, 0 for never"
        f" (default {defaults.figures_interval_s:g})",
    )
    parser.add_argument(
        "--standbys",
        type=int,
        default=defaults.max_standbys,
        metavar="N",
        help="shards not owned to keep warm (tailing their changelog), so a takeover"
        " catches up instead of restoring; each holds a shard's state in memory"
        f" (default {defaults.max_standbys})",
    )
    parser.add_argument(
        "--target-topic",
        action="append",
        default=[],
        metavar="NAME|PREFIX*",
        help="a topic Kafka targets may write to (repeatable; with KAFKRON_TARGET_TOPICS,"
        " comma separated); give every scheduler of the namespace the same ones. None:"
        " Kafka targets are refused",
    )
    parser.add_argument(
        "--target-ack-timeout-s",
        type=float,
        default=None,
        metavar="S",
        help="a Kafka target's batch not acknowledged by then (no leader, too few in-sync"
        " replicas) while the rest of its transaction was: its occurrences fail and the"
        " topic is refused for a while. Below the commit timeout (15 s) and above the"
        " longest leader failover you expect, or a failover dead-letters occurrences"
        " (default: off, the commit timeout alone)",
    )
    add_loop_argument(parser)
    observe_args.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        loop_name = chosen(args.loop)
    except ValueError as exc:
        return output.fail("scheduler", str(exc), 2)
    if args.session_timeout_ms < 1_000:
        return output.fail("scheduler", "--session-timeout-ms must be at least 1000", 2)
    if not 0 < args.heartbeat_ms * 3 <= args.session_timeout_ms:
        return output.fail(
            "scheduler", "--heartbeat-ms must be positive and at most a third of the session", 2
        )
    if args.max_batch < 1:
        return output.fail("scheduler", "--max-batch must be at least 1", 2)
    if args.max_fires_per_turn < 1:
        return output.fail("scheduler", "--max-fires-per-turn must be at least 1", 2)
    if args.skew_bound_ms < 0:
        return output.fail("scheduler", "--skew-bound-ms must be >= 0", 2)
    if args.standbys < 0:
        return output.fail("scheduler", "--standbys must be >= 0", 2)
    try:
        target_topics = patterns_from_env(tuple(args.target_topic))
        if args.target_ack_timeout_s is not None:
            check_deadline(args.target_ack_timeout_s, RuntimeOptions().commit_timeout_s)
    except ValueError as exc:
        return output.fail("scheduler", str(exc), 2)
    try:
        port = observe_args.metrics_port(args)
        # aiokafka logs every refused reconnect while a broker is away; the runtime
        # says what matters (failed transactions, lost shards) itself.
        observe_args.setup_logging(args)
    except (MetricsError, ValueError) as exc:
        return output.fail("scheduler", str(exc), 2)
    options = RuntimeOptions(
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_ms=args.heartbeat_ms,
        max_batch=args.max_batch,
        max_fires_per_turn=args.max_fires_per_turn,
        skew_bound_ms=args.skew_bound_ms,
        figures_interval_s=args.figures_interval_s,
        max_standbys=args.standbys,
        target_topics=target_topics,
        target_ack_timeout_s=args.target_ack_timeout_s,
    )
    settings = Settings.from_env()
    if not guard("scheduler", settings):
        return 1
    runtime = SchedulerRuntime(settings, options)
    try:
        run_main(_serve(runtime, port), new_loop=lambda: new_event_loop(loop_name))
    except (TopicsError, RuntimeError, MetricsError) as exc:
        return output.fail("scheduler", str(exc), 1)
    except KafkaError as exc:
        return output.fail(
            "scheduler",
            f"Kafka at {runtime.settings.bootstrap} failed ({exc}); check that it runs"
            " (`kafkron broker status`) or set KAFKRON_BOOTSTRAP",
            1,
        )
    return 0


async def _serve(runtime: SchedulerRuntime, metrics_port: int | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    logging.getLogger("kafkron").info("event loop: %s", loop_kind(loop))
    deadline = StopDeadline("the scheduler", STOP_DEADLINE_S)

    def request_stop() -> None:
        deadline.arm()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop)
    settings = runtime.settings
    collectors: list[Collector] = []
    samplers: list[Sampler] = []
    if metrics_port is not None:
        shards = await shard_count(settings)
        collectors.append(SchedulerCollector(runtime, lambda: shards))
        samplers.append(
            LagSampler(
                settings,
                settings.scheduler_group,
                [settings.topic(TopicKind.COMMANDS), settings.topic(TopicKind.RESULTS)],
            )
        )
        samplers.append(QueueAgeSampler(settings))  # waiting runs per worker queue
    # The deadline stays armed to the end: the interpreter's exit can hang too.
    async with observe_args.maybe_serve_metrics(metrics_port, collectors, samplers):
        await runtime.run(stop)
