"""Keys accepted as literals before keys had placeholders keep their meaning through an
upgrade (docs/DESIGN.md §8.2): a definition's changelog doc written by this version
says its keys are templates (`key_templates.RENDERED_MARK`, only when a key holds a
brace); the same bytes without it are an older version's, whose keys stay literal. A
rendered key a worker would refuse is never written either."""

from __future__ import annotations

from typing import Any

import orjson

from actors.shard.definition import clear_caches
from actors.views.ratelimits import rate_waiting_note
from actors.views.schedules import run_key_of, schedule_json
from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from topics.key_templates import RENDERED_MARK, renders_keys
from topics.messages import parse_run
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.ratelimits import PauseState
from topics.records import TargetRecord
from topics.targets import TargetTopic, TargetTopics

RUNS = "kafkron.runs"
TOPICS = TargetTopics(known={RUNS: TargetTopic(12, 1_000_000)}, own_prefix="kafkron.")
LEGACY = "LEGACYKEY"  # no brace: the doc an older version wrote, without the mark


def _job(key: str, args: dict[str, Any], field: str = "concurrency") -> dict[str, Any]:
    limit = {"key": key, "limit": 1} if field == "concurrency" else {"key": key, "per_s": 5}
    return {"name": "j", "args": args, field: limit}


def _older(shard: Shard, old: bytes, new: bytes) -> Shard:
    """``shard`` restored from its changelog as an older version could have written it
    (``old`` replaced by ``new`` in every record, so the docs hold no mark)."""
    clear_caches()
    shard.changelog = {k: (v.replace(old, new) if v else v) for k, v in shard.changelog.items()}
    restored, _ = shard.restored(T0 + MINUTE // 2)
    restored.core.set_target_topics(TOPICS)
    return restored


def _fired(shard: Shard) -> list[TargetRecord]:
    return [r for r in shard.advance(T0 + MINUTE).records if type(r) is TargetRecord]


def _docs(shard: Shard) -> list[dict[str, Any]]:
    """The definitions' docs of ``shard``'s changelog (each record's ``def``)."""
    docs = [orjson.loads(v) for v in shard.changelog.values() if v]
    return [d["def"] for d in docs if isinstance(d, dict) and isinstance(d.get("def"), dict)]


def test_an_older_changelogs_braced_keys_stay_literal_on_their_partition() -> None:
    for literal in ("a{{b}}", "{schedule_id}", "tenant-{args.c}"):
        shard = Shard()
        shard.core.set_target_topics(TOPICS)
        for sid in ("s1", "s2"):
            assert not shard.send(upsert(sid, job=_job(LEGACY, {"c": "x"}))).rejected
        records = _fired(_older(shard, LEGACY.encode(), literal.encode()))
        assert len(records) == 2
        for record in records:
            key = parse_run(record.value or b"").job.concurrency.key  # type: ignore[union-attr]
            assert key == literal, f"{literal!r} became {key!r}"
            assert record.partition == murmur2_partition(literal.encode(), 12)


def test_an_older_rate_key_that_would_render_to_a_refused_key_stays_literal() -> None:
    # 'x-{args.c}' was a valid literal rate key; rendered with c = 'a/b' it would hold
    # '/', which every worker's decoder refuses (no result, retried into the DLQ).
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    shard.send(upsert("s", job=_job(LEGACY, {"c": "ab"}, "rate_limit")))
    shard = _older(shard, b'"LEGACYKEY"', b'"x-{args.c}"')
    shard = _older(shard, b'"ab"', b'"a/b"')
    (record,) = _fired(shard)
    rate = parse_run(record.value or b"").job.rate_limit  # the worker's decoder takes it
    assert rate is not None and rate.key == "x-{args.c}"


def test_a_marked_key_rendering_to_a_refused_key_is_kept_literal_too() -> None:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    assert not shard.send(upsert("s", job=_job("x-{args.c}", {"c": "ab"}, "rate_limit"))).rejected
    assert [d.get(RENDERED_MARK) for d in _docs(shard)] == [True]
    (record,) = _fired(_older(shard, b'"ab"', b'"a/b"'))  # a doc the upsert would refuse
    rate = parse_run(record.value or b"").job.rate_limit
    assert rate is not None and rate.key == "x-{args.c}"


def test_only_a_braced_key_marks_the_doc_so_other_definitions_keep_their_bytes() -> None:
    shard = Shard()
    shard.send(upsert("plain", job=_job("customer-42", {})))
    shard.send(upsert("none", job={"name": "j", "args": {}}))
    plain = _docs(shard)
    assert len(plain) == 2 and all(RENDERED_MARK not in doc for doc in plain)
    shard.send(upsert("t", job=_job("inv-{schedule_id}", {})))
    tasks = {"a": {"job": _job("dag-{schedule_id}", {})}}
    shard.send(command("dag.upsert", "d", spec={"every": "60s"}, tasks=tasks))
    assert sum(renders_keys(doc) for doc in _docs(shard)) == 2


def test_an_older_dags_task_key_stays_literal() -> None:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    tasks = {"a": {"job": _job(LEGACY, {})}}
    shard.send(command("dag.upsert", "nightly", spec={"every": "60s"}, tasks=tasks))
    (record,) = _fired(_older(shard, LEGACY.encode(), b"dag-{schedule_id}"))
    key = parse_run(record.value or b"").job.concurrency.key  # type: ignore[union-attr]
    assert key == "dag-{schedule_id}"


def test_the_views_show_an_older_key_as_literal_and_its_pause_applies() -> None:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    shard.send(upsert("s", job=_job(LEGACY, {"c": "x"}, "rate_limit")))
    shard = _older(shard, b'"LEGACYKEY"', b'"tenant-{args.c}"')
    _fired(shard)
    state = shard.core.schedule("s")
    assert state is not None
    doc = orjson.loads(state.def_bytes)
    assert run_key_of(doc["job"], "s", renders_keys(doc)) is None
    assert schedule_json(state)["run_key"] is None
    pauses = {"tenant-{args.c}": PauseState(None, "quota", T0, None)}  # paused before
    note = rate_waiting_note(state, pauses, T0 + MINUTE)
    assert note is not None and "tenant-{args.c}" in note


def test_a_pause_naming_a_keys_placeholder_is_rejected_saying_to_pause_the_rendered_key() -> None:
    shard = Shard()
    pauses = {"kafkron.ratelimits": TargetTopic(1, 1_000_000)}
    shard.core.set_target_topics(TargetTopics(known=pauses, own_prefix="kafkron."))
    for key in ("invoice-{args.customer}", "{schedule_id}"):
        out = shard.send(command("ratelimit.pause", key))
        assert out.of(TopicKind.RATELIMITS) == []
        (rejected,) = out.rejected
        assert "pause the rendered key" in rejected.reason
    for literal in ("a{b}", "x{{y}}", "invoice-c-42"):  # braces, no placeholder: a key
        assert not shard.send(command("ratelimit.pause", literal)).rejected
