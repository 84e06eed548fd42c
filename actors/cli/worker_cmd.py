"""`kafkron worker --jobs MODULE[,MODULE] | --http-only [--concurrency N]`: run jobs and
HTTP targets from {ns}.runs."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from actors.cli import observe_args, output
from actors.cli.stop_deadline import StopDeadline, run_main
from actors.cli.topics_cmd import guard
from actors.collector import tune_for_throughput
from actors.event_loop import add_loop_argument, chosen, loop_kind, new_event_loop
from actors.observe.collectors import WorkerCollector
from actors.observe.exposition import MetricsError
from actors.observe.flow_metrics import MAX_KEY_LABELS, KeyLabels
from actors.observe.lag import LagSampler
from actors.worker.egress import EgressRule
from actors.worker.http_target import HttpTargets
from actors.worker.lanes import SlotPool, parse_reserve
from actors.worker.registry import REGISTRY, load_job_modules
from actors.worker.runtime import WorkerOptions, WorkerRuntime, default_worker_id
from actors.worker.secrets import SecretError, Secrets
from topics.closing import bounded
from topics.command_fields import FieldError
from topics.names import Settings, TopicKind
from topics.priority import LANE_MIN_PRIORITY
from topics.queues import DEFAULT_QUEUE, check_queue
from topics.targets import HTTP_JOB

# After the drain: the jobs' cancellation, the last commits and the closes, each
# bounded; a stop still running this long after the drain exits with code 3.
STOP_AFTER_DRAIN_S = 30.0

_EPILOG = """\
examples:
  kafkron worker --jobs actors.examples.billing.jobs
  kafkron worker --jobs actors.examples.billing.jobs,myapp.jobs --concurrency 16
  kafkron worker --jobs myapp.gpu_jobs --queue gpu --queue gpu-large
  kafkron worker --jobs myapp.jobs --lanes --reserve 2
  kafkron worker --http-only --secrets /etc/kafkron/secrets.env --http-allow 10.1.2.0/24

Joins the consumer group {ns}-workers on {ns}.runs (with --queue Q: the group
{ns}-workers.Q on {ns}.runs.Q, per queue named, each with its own --concurrency
slots; with --lanes also the group {ns}-workers.Q.hi on the queue's high lane
{ns}.runs.Q.hi, {ns}.runs.default.hi for the default queue, sharing the queue's
slots and started first, but one normal run at least per 4 high ones; --reserve N[:P]
keeps N slots for runs of priority P or more); start as many workers as you
like, the group shares the partitions among them. Each run's result and its offset
are committed in one transaction, so a run whose result is visible is never run
again by this group, and a run whose worker died is run again (at least once):
give side effects an idempotency key, ctx.idempotency_key(...).

Every worker also runs HTTP targets (schedules with "target": {"http": ...}); with
--http-only it runs nothing else. Each request carries Idempotency-Key, the run's
key, the same on every attempt. Egress: loopback, link-local (the cloud metadata
address too), private, multicast and unspecified addresses are refused unless
--http-allow names them (an address, a CIDR or a host name; repeatable), judged on
the address connected to; redirects are not followed. A header {"secret": NAME}
is read when sent from --secrets FILE (JSON, or NAME=VALUE lines; chmod 600), else
from the environment variable KAFKRON_SECRET_NAME (upper case, - as _).

SIGTERM or Ctrl-C drains: no new runs start, running ones get --drain-s seconds to
finish, then the worker leaves the group. A second Ctrl-C stops at once. A stop
not ended 30 s after the drain exits with code 3, logging what each task awaited.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run registered jobs from the runs topic and publish their results",
        description="The worker actor: run jobs, publish results, commit offsets.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--jobs",
        metavar="MODULE[,MODULE]",
        help="modules to import; their @job functions are what this worker runs "
        "(besides HTTP targets)",
    )
    parser.add_argument(
        "--http-only",
        action="store_true",
        help="run HTTP targets only, no job modules",
    )
    parser.add_argument(
        "--http-allow",
        action="append",
        default=[],
        metavar="HOST_OR_CIDR",
        help="let HTTP targets reach this address, CIDR or host name although it is "
        "loopback, link-local, private, multicast or unspecified (repeatable)",
    )
    parser.add_argument(
        "--secrets",
        metavar="FILE",
        help="named secrets of HTTP targets' headers: a JSON object or NAME=VALUE lines "
        "(read again when it changes; chmod 600); KAFKRON_SECRET_<NAME> otherwise",
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="jobs at once (default 8)"
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=10_000,
        metavar="MS",
        help="group session: how long a silent worker keeps its partitions (default 10000)",
    )
    parser.add_argument(
        "--max-poll-interval-ms",
        type=int,
        default=300_000,
        metavar="MS",
        help="Kafka's max.poll.interval.ms (default 300000; long jobs do not need more)",
    )
    parser.add_argument(
        "--drain-s",
        type=float,
        default=30.0,
        metavar="S",
        help="on stop, seconds running jobs may take to finish (default 30)",
    )
    parser.add_argument(
        "--lease-loss-heartbeats",
        type=int,
        default=3,
        metavar="N",
        help="cancel all jobs after N heartbeat intervals without reaching the group "
        "coordinator (default 3; 0: never, rely on fencing alone: a worker cut off from "
        "the group then runs on until its next commit is fenced, so concurrency keys and "
        "rate limits may be exceeded across a failover; an adopted partition's keyed and "
        "rate-limited runs still wait a rebalance's hold, the rebalance timeout less a "
        "heartbeat interval). Every worker of a queue must use the same session, "
        "rebalance and lease settings: the adoption wait is computed from a worker's own",
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="serve only this worker queue's runs (repeatable; default: the default queue,"
        " {ns}.runs); queue Q is {ns}.runs.Q, created by kafkron topics create --queue Q",
    )
    parser.add_argument(
        "--lanes",
        action="store_true",
        help="also serve each queue's high lane ({ns}.runs.Q.hi: runs of priority 5-9),"
        " first, sharing the --concurrency slots; created by kafkron topics create --lanes",
    )
    parser.add_argument(
        "--reserve",
        metavar="N[:P]",
        help="keep N of the --concurrency slots for runs of priority P or more (P 1-9, default 5)",
    )
    parser.add_argument(
        "--metrics-key",
        action="append",
        default=[],
        metavar="PATTERN",
        help="give concurrency and rate-limit keys matching PATTERN (a glob: *, ?, [...];"
        f" repeatable; at most {MAX_KEY_LABELS} keys) a label of their own in the metrics;"
        ' every other key is summed under key="_other"',
    )
    parser.add_argument("--worker-id", default=None, help="name in results (default HOST:PID)")
    add_loop_argument(parser)
    observe_args.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        loop_name = chosen(args.loop)
    except ValueError as exc:
        return output.fail("worker", str(exc), 2)
    if args.concurrency < 1:
        return output.fail("worker", "--concurrency must be at least 1", 2)
    if args.session_timeout_ms < 1_000:
        return output.fail("worker", "--session-timeout-ms must be at least 1000", 2)
    try:
        reserve = (0, LANE_MIN_PRIORITY) if args.reserve is None else parse_reserve(args.reserve)
        if reserve[0] >= args.concurrency:
            raise ValueError(f"--reserve {args.reserve}: N must be below --concurrency")
        if reserve[0] and reserve[1] >= LANE_MIN_PRIORITY and not args.lanes:
            # Runs of priority 5 or more are written to the high lane's topic only,
            # which this worker would not read: the N slots would stay idle for ever.
            raise ValueError(
                f"--reserve {args.reserve}: runs of priority {LANE_MIN_PRIORITY} or more"
                " reach a worker only through its high lane; add --lanes, or reserve for"
                f" a priority below {LANE_MIN_PRIORITY} (N:P)"
            )
    except ValueError as exc:
        return output.fail("worker", str(exc), 2)
    try:
        port = observe_args.metrics_port(args)
        observe_args.setup_logging(args)
    except (MetricsError, ValueError) as exc:
        return output.fail("worker", str(exc), 2)
    if args.http_only == (args.jobs is not None):
        return output.fail(
            "worker",
            "give --jobs MODULE[,MODULE] (jobs and HTTP targets) or --http-only",
            2,
        )
    registry = REGISTRY
    if args.jobs is not None:
        modules = [m.strip() for m in args.jobs.split(",") if m.strip()]
        if not modules:
            return output.fail("worker", "--jobs needs at least one module", 2)
        try:
            registry = load_job_modules(modules)
        except ImportError as exc:
            return output.fail("worker", str(exc), 2)
        if not registry.names():
            return output.fail(
                "worker",
                f"no @job functions found in {', '.join(modules)}; decorate them with "
                '@job("name") (from actors import job)',
                2,
            )
    try:
        targets = HttpTargets(EgressRule.of(args.http_allow), Secrets(args.secrets))
    except (ValueError, SecretError) as exc:
        return output.fail("worker", str(exc), 2)
    registry.register_builtin(HTTP_JOB, targets.send)
    options = WorkerOptions(
        concurrency=args.concurrency,
        session_timeout_ms=args.session_timeout_ms,
        max_poll_interval_ms=args.max_poll_interval_ms,
        drain_s=args.drain_s,
        lease_loss_heartbeats=args.lease_loss_heartbeats,
        worker_id=args.worker_id or default_worker_id(),
    )
    try:
        queues = tuple(dict.fromkeys(check_queue(q, "--queue") for q in args.queue))
    except FieldError as exc:
        return output.fail("worker", str(exc), 2)
    base = Settings.from_env()
    runtimes = []
    for queue in queues or (DEFAULT_QUEUE,):
        # One runtime per queue: its own group, consumer, producers and slots, so the
        # queues' partitions, offsets and rebalances never mix (docs/DESIGN.md §8.1).
        settings = base.for_queue(queue)
        lanes = [settings.for_lane()] if args.lanes else []
        # The worker's principal may describe only its own topics (runs in, results out).
        for each in (settings, *lanes):
            if not guard("worker", each, (TopicKind.RUNS, TopicKind.RESULTS)):
                return 1
        # A queue's lanes share its slots, the high lane first (docs/DESIGN.md §8.4).
        pool = None
        if args.lanes or args.reserve is not None:
            pool = SlotPool(args.concurrency, reserve=reserve[0], reserve_min_priority=reserve[1])
        runtimes += [WorkerRuntime(each, registry, options, pool) for each in (settings, *lanes)]
    tune_for_throughput()  # the process's own policy: imports and jobs loaded, now run
    try:
        served = _serve(runtimes, port, targets, KeyLabels(args.metrics_key))
        run_main(served, new_loop=lambda: new_event_loop(loop_name))
    except asyncio.CancelledError:  # a second SIGINT/SIGTERM: stopped without draining
        return 130
    except MetricsError as exc:
        return output.fail("worker", str(exc), 1)
    return 0


async def _serve(
    runtimes: list[WorkerRuntime],
    metrics_port: int | None,
    targets: HttpTargets | None = None,
    key_labels: KeyLabels | None = None,
) -> None:
    runtime = runtimes[0]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    logging.getLogger("kafkron").info("event loop: %s", loop_kind(loop))
    main = asyncio.current_task()

    # The drain, then the bounded closes; past that the process exits (code 3).
    deadline = StopDeadline("the worker", runtime.options.drain_s + STOP_AFTER_DRAIN_S)

    def request_stop() -> None:
        deadline.arm()
        if stop.is_set() and main is not None:
            main.cancel()  # a second signal: stop now
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)
    groups = [(r.settings.worker_group, [r.settings.topic(TopicKind.RUNS)]) for r in runtimes]
    sampler = LagSampler(runtime.settings, *groups[0], more=groups[1:])
    # The deadline stays armed to the end: the interpreter's exit joins job
    # threads, and a sync job that ignored its cancel would hold the process up.
    try:
        # A runtime that fails takes the others down with it (the process exits and
        # its queues' partitions go to other workers), never half a worker.
        async with (
            observe_args.maybe_serve_metrics(
                metrics_port, [WorkerCollector(runtimes, key_labels)], [sampler]
            ),
            asyncio.TaskGroup() as group,
        ):
            for each in runtimes:
                group.create_task(each.run(stop))
    finally:
        if targets is not None:  # its connections, after the last request
            await bounded(targets.close(), "closing the HTTP targets")
