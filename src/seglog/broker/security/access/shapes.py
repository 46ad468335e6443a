"""The shapes of plan that several APIs share, and the failed entries they answer with.

Topics with partitions (:func:`partitioned`: Produce, Fetch, ListOffsets …,
each in its :class:`Layout`), named items each allowed or not (:func:`named`),
one group for the whole request (:func:`group`), the cluster for the whole
request (:func:`cluster`). Every entry they add to a response is built by
:func:`seglog.protocol.entries.failed` from the API's response description.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
    GROUP,
    GROUP_FAILED,
    TOPIC,
    TOPIC_FAILED,
    Access,
    Decision,
    Fix,
    Plan,
)
from seglog.broker.security.authorizer import Operation
from seglog.protocol import entries
from seglog.protocol.entries import failed


@dataclass(frozen=True)
class Layout:
    """Where an API keeps topics and partitions, in its request and in its response."""

    topics: str
    name: str
    partitions: str
    index: str
    response_topics: str
    response_name: str
    response_partitions: str
    response_index: str


COMMON = Layout(*("topics", "name", "partitions", "partition_index") * 2)
"""ListOffsets, DeleteRecords and the offset APIs of groups."""
PRODUCE = Layout(
    "topic_data", "name", "partition_data", "index",
    "responses", "name", "partition_responses", "index",
)  # fmt: skip
FETCH = Layout(
    "topics", "topic", "partitions", "partition",
    "responses", "topic", "partitions", "partition_index",
)  # fmt: skip
EPOCHS = Layout(*("topics", "topic", "partitions", "partition") * 2)


def partitioned(api_key: int, layout: Layout, operation: Operation) -> Plan:
    """A plan for APIs of topics with partitions: unauthorized topics fail per partition."""

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        kept, denied = [], []
        for topic in body.get(layout.topics) or []:
            name = topic.get(layout.name)
            if name is None or access.allowed(operation, TOPIC, name):
                kept.append(topic)
            else:
                denied.append(topic)
        if not denied:
            return Decision()
        body[layout.topics] = kept
        return Decision(fixes=[partition_errors(api_key, layout, denied, TOPIC_FAILED)])

    return plan


def partition_errors(api_key: int, layout: Layout, denied: list[dict[str, Any]], code: int) -> Fix:
    """The fix that answers each partition of the ``denied`` topics with ``code``."""

    def fix(response: dict[str, Any]) -> None:
        response.setdefault(layout.response_topics, []).extend(
            failed_topic(api_key, layout, topic, code) for topic in denied
        )

    return fix


def failed_partitions(
    api_key: int,
    path: str,
    partitions: str,
    code: int,
    indexes: Iterable[int],
    index: str = "partition_index",
    **topic: Any,
) -> dict[str, Any]:
    """The topic entry at ``path`` (``topic``: its name) whose ``indexes`` all failed."""
    inner = f"{path}.{partitions}"
    failures = [failed(api_key, inner, code, **{index: i}) for i in indexes]
    return entries.entry(api_key, path, **topic, **{partitions: failures})


def failed_topic(api_key: int, layout: Layout, topic: dict[str, Any], code: int) -> dict[str, Any]:
    """A topic's entry in which each requested partition failed with ``code``."""
    return failed_partitions(
        api_key,
        layout.response_topics,
        layout.response_partitions,
        code,
        (p[layout.index] for p in topic.get(layout.partitions) or []),
        layout.response_index,
        **{layout.response_name: topic[layout.name]},
    )


def failed_topics(api_key: int, layout: Layout, body: dict[str, Any], code: int) -> dict[str, Any]:
    """A whole response in which every requested partition failed with ``code``."""
    topics = body.get(layout.topics) or []
    return entries.entry(
        api_key,
        "",
        **{layout.response_topics: [failed_topic(api_key, layout, t, code) for t in topics]},
    )


def named(
    request_list: str,
    name_of: Callable[[Any], str],
    allowed: Callable[[Access, Any], bool],
    response_list: str,
    entry: Callable[[Any], dict[str, Any]],
) -> Plan:
    """A plan for APIs of named items (topics, groups, resources), each allowed or not.

    ``entry`` builds a denied item's answer (with :func:`failed`).
    """

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        items = body.get(request_list)
        if not items:
            return Decision()
        kept = [i for i in items if allowed(access, i)]
        denied = [i for i in items if not allowed(access, i)]
        if not denied:
            return Decision()
        body[request_list] = kept

        def fix(response: dict[str, Any]) -> None:
            response.setdefault(response_list, []).extend(entry(i) for i in denied)

        return Decision(fixes=[fix])

    return plan


def group(api_key: int, operation: Operation, key: str = "group_id") -> Plan:
    """A whole request about one group: GROUP_AUTHORIZATION_FAILED without ``operation``."""

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        if access.allowed(operation, GROUP, body[key]):
            return Decision()
        return Decision(response=failed(api_key, "", GROUP_FAILED))

    return plan


def cluster(operation: Operation, response: Callable[[dict[str, Any]], dict[str, Any]]) -> Plan:
    """A whole request on the cluster: without ``operation``, ``response(body)`` is the answer."""

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        if access.cluster(operation):
            return Decision()
        return Decision(response=response(body))

    return plan


def topic_names(
    request_list: str,
    response_list: str,
    entry: Callable[[Any], dict[str, Any]],
    operation: Operation = Operation.DESCRIBE,
) -> Plan:
    """Topics by name that each need ``operation`` (DescribeProducers, DescribeTopicPartitions)."""
    return named(
        request_list,
        lambda t: t["name"],
        lambda a, t: a.allowed(operation, TOPIC, t["name"]),
        response_list,
        entry,
    )


def cluster_failed(api_key: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A refusal of the whole request: CLUSTER_AUTHORIZATION_FAILED, nothing listed."""
    return lambda body: failed(api_key, "", CLUSTER_FAILED)
