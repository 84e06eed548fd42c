"""Validation of a DAG's dependency graph, and the order its tasks can run in.

A DAG command names its tasks and, for each, the tasks it runs ``after``. Before a
shard accepts it, the graph must be usable: not empty, at most `MAX_TASKS` tasks,
every dependency a known task, and no cycle. A cycle is reported by naming it,
``a -> b -> a``, where ``x -> y`` reads "y runs after x" (the direction work flows),
so the person knows exactly which ``after`` entry to remove.

`topological_order` is deterministic: among the tasks that are ready at the same
time, the one declared first in the command comes first. A changelog rebuild of the
same command therefore yields the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from topics.command_fields import clip

MAX_TASKS = 1000


class GraphError(ValueError):
    """The graph cannot run; ``str(error)`` says why and what to change."""


def topological_order(after: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Every task, each after all of its dependencies; raises `GraphError` otherwise.

    ``after`` maps each task name to the names it runs after, in declaration order.
    """
    if not after:
        raise GraphError("tasks: a DAG needs at least one task")
    if len(after) > MAX_TASKS:
        raise GraphError(
            f"tasks: at most {MAX_TASKS} tasks per DAG, got {len(after)}; "
            "split it into several DAGs"
        )
    index = {name: position for position, name in enumerate(after)}
    downstream: dict[str, list[str]] = {name: [] for name in after}
    waiting_on: dict[str, int] = {}
    for name, dependencies in after.items():
        unique = dict.fromkeys(dependencies)
        for dependency in unique:
            if dependency not in index:
                raise GraphError(
                    f"tasks.{name}.after: {dependency!r} is not a task of this DAG; "
                    f"known tasks are {_some(sorted(index))}"
                )
            downstream[dependency].append(name)
        waiting_on[name] = len(unique)
    ready = [index[name] for name, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    names = list(after)
    order: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for follower in downstream[name]:
            waiting_on[follower] -= 1
            if waiting_on[follower] == 0:
                heapq.heappush(ready, index[follower])
    if len(order) < len(after):
        cycle = find_cycle(after, {name for name, count in waiting_on.items() if count > 0})
        raise GraphError(
            f"tasks: the dependencies form a cycle, {_loop(cycle)} "
            f'("x -> y" means y lists x in "after"); remove one of these "after" entries'
        )
    return tuple(order)


def find_cycle(after: Mapping[str, Sequence[str]], blocked: set[str]) -> list[str]:
    """One cycle among ``blocked`` (tasks Kahn's algorithm could not order).

    Every blocked task waits on at least one blocked task, so walking "runs after"
    edges from any blocked task must revisit one; the revisited stretch is a cycle.
    The walk starts at the first declared blocked task, so the answer is stable.
    It is returned in flow direction and closed: ``["a", "b", "a"]``.
    """
    start = next(name for name in after if name in blocked)
    seen: dict[str, int] = {}
    path: list[str] = []
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(dep for dep in after[node] if dep in blocked)
    loop = path[seen[node] :]  # each entry runs after the next one
    loop.reverse()  # now each entry runs before the next one (flow direction)
    # Rotate so the first declared task of the loop leads, for a stable message.
    declared = {name: position for position, name in enumerate(after)}
    lead = min(range(len(loop)), key=lambda i: declared[loop[i]])
    loop = loop[lead:] + loop[:lead]
    return [*loop, loop[0]]


# A reason goes into a Kafka record and in front of a person: name a few, count the rest.
_NAMED_AT_MOST = 12


def _some(names: list[str]) -> str:
    shown = ", ".join(clip(name) for name in names[:_NAMED_AT_MOST])
    more = len(names) - _NAMED_AT_MOST
    return shown if more <= 0 else f"{shown} and {more} more"


def _loop(cycle: list[str]) -> str:
    """The closed cycle ``a -> b -> a``; a very long one shows its start and its size."""
    if len(cycle) <= _NAMED_AT_MOST + 1:
        return " -> ".join(clip(name) for name in cycle)
    head = " -> ".join(clip(name) for name in cycle[:_NAMED_AT_MOST])
    return f"{head} -> ... -> {clip(cycle[0])} ({len(cycle) - 1} tasks)"
