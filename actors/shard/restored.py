"""A schedule's or a DAG's `Definition` from its changelog bytes, for a restore.

The one place that knows both kinds: `actors.shard.dag_definition` builds on
`actors.shard.definition`, so choosing between them belongs above both (the
presence of ``"tasks"`` is what marks a DAG's definition).
"""

from __future__ import annotations

import orjson

from actors.shard.dag_definition import restored_dag_definition
from actors.shard.definition import (
    Definition,
    cached_definition,
    restored_schedule_definition,
)


def restored_definition(schedule_id: str, def_bytes: bytes) -> Definition:
    """The `Definition` behind changelog bytes written by `definition_bytes`.

    Raises ``SpecError`` or ``ValueError`` only if the bytes were not written by
    this version (or the zone database lost a zone).
    """
    shared = cached_definition(def_bytes)
    if shared is not None:
        return shared
    doc = orjson.loads(def_bytes)
    if "tasks" in doc:
        return restored_dag_definition(schedule_id, doc)
    return restored_schedule_definition(schedule_id, def_bytes, doc)
