"""Named questions about partitions, each answered by the partition's leader.

Alone, a broker answers for every partition itself. One node of several
answers for the partitions it leads and asks each other leader for its own,
over the nodes' control channel (one op, :data:`OP`, whatever the question),
then puts the answers back in the order asked. Asking the leader rather than
reading its files in place: only the leader knows its partitions' high
watermark, last stable offset and open transactions, and it holds its active
segment's key index in memory.

A question is a function ``(log_dir, topic, partition, args) -> JSON value``
registered under a name with :func:`register` (key lookup, a partition's
summary, its segments, a page of its records); the modules that define them
register them when imported, which the API's server does, so every node can
answer every question. Questions block (file reads), so they run in worker
threads, never on the event loop; the leader serves :data:`OP` on its
channel's threads.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from seglog.broker.nodes.cluster import Cluster
from seglog.errors import SeglogError
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_list import TopicInfo

OP = "partition_query"
"""The control-channel op a node serves for the partitions it leads."""
PEER_TIMEOUT = 30.0
"""How long a node waits for another node's answers."""

Question = Callable[[LogDir, str, int, dict[str, Any]], Any]
"""A question about one partition this process leads: its answer (blocking)."""
Codec = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Registered:
    question: Question
    to_json: Codec
    from_json: Codec


_QUESTIONS: dict[str, _Registered] = {}


def register(
    name: str, question: Question, *, to_json: Codec = _same, from_json: Codec = _same
) -> None:
    """Make ``question`` askable as ``name`` (once per name).

    An answer that is not JSON values already crosses the control channel as
    ``to_json(answer)`` and is read back with ``from_json``; answered here, it
    is used as it is (a key lookup's records are not encoded for nothing).
    """
    entry = _Registered(question, to_json, from_json)
    known = _QUESTIONS.get(name)
    if known is not None and known.question is not question:
        raise ValueError(f"partition question {name!r} is registered twice")
    _QUESTIONS[name] = entry


def _registered(name: str) -> _Registered:
    entry = _QUESTIONS.get(name)
    if entry is None:
        raise SeglogError(f"no partition question named {name!r}")
    return entry


Target = tuple[str, int]
"""A partition: (topic, partition)."""


def answer_local(
    log_dir: LogDir, name: str, targets: Sequence[Target], args: dict[str, Any]
) -> list[Any]:
    """The answers of partitions this process leads, in order (blocking)."""
    question = _registered(name).question
    return [question(log_dir, topic, partition, args) for topic, partition in targets]


def serve(log_dir: LogDir, request: dict[str, Any]) -> dict[str, Any]:
    """The leader's side of :data:`OP` (on a channel thread)."""
    targets = [(str(topic), int(partition)) for topic, partition in request["targets"]]
    name = str(request["question"])
    parts = answer_local(log_dir, name, targets, dict(request["args"]))
    to_json = _registered(name).to_json
    return {"ok": True, "parts": [to_json(part) for part in parts]}


def _ask_node(
    cluster: Cluster, node_id: int, name: str, targets: list[Target], args: dict[str, Any]
) -> list[Any]:
    request = {"op": OP, "question": name, "targets": targets, "args": args}
    from_json = _registered(name).from_json
    return [from_json(part) for part in cluster.control(node_id, request, PEER_TIMEOUT)["parts"]]


async def ask_many(
    log_dir: LogDir,
    cluster: Cluster,
    targets: Sequence[tuple[TopicInfo, int]],
    name: str,
    args: dict[str, Any] | None = None,
) -> list[Any]:
    """Question ``name`` answered for each partition of ``targets`` by its leader, in order.

    One call per leader, all at once, however many topics: a list of a
    thousand topics is one question to each node. ControllerUnavailableError
    when a leader does not answer; the storage layer's errors as they are.
    """
    by_leader: defaultdict[int, list[int]] = defaultdict(list)
    for i, (info, partition) in enumerate(targets):
        by_leader[cluster.leader(info, partition)].append(i)
    values = args or {}
    calls = []
    for node_id, indexes in by_leader.items():
        mine = [(targets[i][0].name, targets[i][1]) for i in indexes]
        if node_id == cluster.node_id:
            calls.append(asyncio.to_thread(answer_local, log_dir, name, mine, values))
        else:
            calls.append(asyncio.to_thread(_ask_node, cluster, node_id, name, mine, values))
    answers = await asyncio.gather(*calls)
    found: list[Any] = [None] * len(targets)
    for indexes, answer in zip(by_leader.values(), answers, strict=True):
        for i, value in zip(indexes, answer, strict=True):
            found[i] = value
    return found


async def ask(
    log_dir: LogDir,
    cluster: Cluster,
    info: TopicInfo,
    partitions: Sequence[int],
    name: str,
    args: dict[str, Any] | None = None,
) -> list[Any]:
    """Question ``name`` for ``partitions`` of one topic, in that order (see :func:`ask_many`)."""
    return await ask_many(log_dir, cluster, [(info, p) for p in partitions], name, args)
