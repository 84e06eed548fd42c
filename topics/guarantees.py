"""What the topics must be for kafkron's guarantees to hold on a cluster: pure rules.

Facts in (each topic's replication factor and configs, the cluster's broker count),
findings out. A finding either *breaks* a guarantee, and the scheduler and worker
refuse to start on it, or only *weakens* one, and they start with a warning:

- ``min.insync.replicas`` below 2 with 3+ replicas breaks exactly-once: a
  transaction (runs, changelog and offsets together) can commit on a leader alone
  and vanish with it. Above the replication factor it breaks firing: no write is
  ever acknowledged.
- ``unclean.leader.election.enable=true`` breaks it too: an out-of-sync replica
  may become leader and drop committed records (fired runs, changelog states).
- ``message.timestamp.type=LogAppendTime`` on ``{ns}.runs``: the scheduler's clock
  guard compares its clock with the broker's append time; without it the guard
  compares with itself and cannot hold firing back.
- ``max.message.bytes`` below the largest record kafkron writes (a 512 KiB
  changelog state): the transaction holding it is refused every time it is retried,
  and its shard stops. On ``{ns}.runs`` it only weakens: a run too large for the
  topic is not written but ended failed (NonRetryable), visibly.
- A replication factor below ``min(3, brokers)`` weakens: one lost disk loses what
  only it held, one broker down stops what only it led, but nothing is fired twice.
  ``min.insync.replicas`` equal to a replication factor above 1 also only
  weakens: one broker down stops writes (firing waits) rather than risking them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topics.names import Settings, TopicKind

# The largest record kafkron writes is a changelog state, bounded by the shard at
# 512 KiB (actors.shard.core.CHANGELOG_MAX_BYTES); commands are capped at 256 KiB,
# so runs, results, dead letters and rejections (base64 of a command) are smaller.
# The scheduler sizes its batches to each topic's limit, but a single record must
# fit in one batch, with the batch's own header around it.
LARGEST_RECORD_BYTES = 512 * 1024
RECORD_BATCH_OVERHEAD_BYTES = 1024
MIN_MAX_MESSAGE_BYTES = LARGEST_RECORD_BYTES + RECORD_BATCH_OVERHEAD_BYTES
# What kafkron sets on its topics: Kafka's own default (1 MiB + 12), stated so a
# cluster whose broker default is lower does not shrink it.
MAX_MESSAGE_BYTES = 1_048_588

# Topic configs the rules read (describe_configs asks for these).
GUARANTEE_KEYS = (
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "message.timestamp.type",
    "max.message.bytes",
)


def replication_factor_for(brokers: int) -> int:
    """The replication factor kafkron asks for on a cluster of `brokers`: three at most."""
    return max(1, min(3, brokers))


def min_insync_for(replicas: int) -> int:
    """In sync replicas an acknowledged write needs: two from three replicas up, else one."""
    return 2 if replicas >= 3 else 1


def topic_configs_for(replicas: int) -> dict[str, str]:
    """The durability configs kafkron sets explicitly on every topic it creates."""
    return {
        "min.insync.replicas": str(min_insync_for(replicas)),
        "unclean.leader.election.enable": "false",
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
    }


@dataclass(frozen=True, slots=True)
class Finding:
    topic: str
    text: str
    breaks: bool  # True: a guarantee is broken; False: only weakened

    def __str__(self) -> str:
        return f"{self.topic}: {self.text}"


def findings(
    settings: Settings,
    replicas: Mapping[str, int],
    configs: Mapping[str, Mapping[str, str]],
    brokers: int,
) -> list[Finding]:
    """Every way the existing topics of `settings` fall short of the guarantees.

    `replicas` is each topic's smallest partition replication factor; topics absent
    from it are skipped (a missing topic is the contract check's to report).
    """
    out: list[Finding] = []
    wanted_rf = replication_factor_for(brokers)
    for kind in TopicKind:
        name = settings.topic(kind)
        if name not in replicas:
            continue
        rf = replicas[name]
        conf = configs.get(name, {})
        fix = f"kafka-configs --alter --entity-type topics --entity-name {name} --add-config"
        min_isr = _int(conf.get("min.insync.replicas"))
        if min_isr is not None and rf >= 3 and min_isr < 2:
            out.append(
                Finding(
                    name,
                    f"min.insync.replicas is {min_isr} with {rf} replicas: a transaction can"
                    f" commit on one broker and be lost with it ({fix} min.insync.replicas=2)",
                    True,
                )
            )
        elif min_isr is not None and min_isr > rf:
            out.append(
                Finding(
                    name,
                    f"min.insync.replicas is {min_isr} but the topic has {rf} replicas: no"
                    f" write can be acknowledged ({fix} min.insync.replicas={min_insync_for(rf)})",
                    True,
                )
            )
        elif min_isr is not None and 1 < rf == min_isr:
            out.append(
                Finding(
                    name,
                    f"min.insync.replicas equals the replication factor ({rf}): one broker down"
                    " stops every write to it",
                    False,
                )
            )
        if conf.get("unclean.leader.election.enable") == "true" and rf > 1:
            out.append(
                Finding(
                    name,
                    "unclean.leader.election.enable is true: an out-of-sync replica may lead"
                    f" and drop committed records ({fix} unclean.leader.election.enable=false)",
                    True,
                )
            )
        if kind is TopicKind.RUNS and conf.get("message.timestamp.type", "LogAppendTime") != (
            "LogAppendTime"
        ):
            out.append(
                Finding(
                    name,
                    f"message.timestamp.type is {conf.get('message.timestamp.type')}, expected"
                    " LogAppendTime: the scheduler's clock guard reads the broker's append time"
                    f" ({fix} message.timestamp.type=LogAppendTime)",
                    True,
                )
            )
        max_bytes = _int(conf.get("max.message.bytes"))
        if max_bytes is not None and max_bytes < MIN_MAX_MESSAGE_BYTES:
            # A run too large for {ns}.runs is never written: the shard ends that attempt
            # failed (NonRetryable) and fires the rest, so there it only weakens.
            runs = kind is TopicKind.RUNS
            consequence = (
                "runs larger than that end failed (NonRetryable) instead of running"
                if runs
                else f"below the {MIN_MAX_MESSAGE_BYTES} bytes the largest record kafkron"
                " writes needs"
            )
            out.append(
                Finding(
                    name,
                    f"max.message.bytes is {max_bytes}: {consequence}"
                    f" ({fix} max.message.bytes={MAX_MESSAGE_BYTES})",
                    not runs,
                )
            )
        if rf < wanted_rf:
            out.append(
                Finding(
                    name,
                    f"replication factor {rf} on a cluster of {brokers} brokers (expected"
                    f" {wanted_rf}): one lost disk loses what only it holds. Recreate the"
                    " topics or add replicas with kafka-reassign-partitions",
                    False,
                )
            )
    return out


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None
