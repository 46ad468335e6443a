"""``seglog transactions``: list, describe, find hanging and abort transactions,
like kafka-transactions.sh.

confluent-kafka has no admin call for transactions, so the command speaks the
requests itself (ListTransactions, DescribeTransactions, DescribeProducers,
Metadata, WriteTxnMarkers) through :mod:`seglog.cli._raw_client` (secured as
the client properties say), encoded by :mod:`seglog.protocol`. One broker is
the coordinator of every transactional id, so no coordinator lookup is needed;
``abort`` sends its marker to the partition's leader, as Kafka's tool does.
"""

from __future__ import annotations

import time
from typing import Any

import click

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    client_options,
    text_table,
)
from seglog.cli._raw_client import kafka_request
from seglog.protocol import ApiKey, error_codes

_CLIENT_ID = "seglog-transactions"


def _request(
    client: ClientSettings,
    api: ApiKey,
    version: int,
    body: dict[str, Any],
    address: str | None = None,
) -> Any:
    """One request to ``address`` (else the first bootstrap server), and its decoded answer."""
    return kafka_request(client, api, version, body, address=address, client_id=_CLIENT_ID)


def _check(code: int, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {error_codes.name_for(code)}")


@click.group("transactions")
def transactions() -> None:
    """List, describe, find hanging and abort transactions (like kafka-transactions.sh)."""


@transactions.command("list")
@client_options
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only transactions in this state (Ongoing, CompleteCommit...; repeatable).",
)
@click.option(
    "--producer-id", "producer_ids", type=int, multiple=True, help="Only this producer id."
)
@click.option(
    "--duration-filter",
    type=click.IntRange(min=0),
    default=None,
    metavar="MS",
    help="Only transactions open for longer than this.",
)
def list_transactions(
    client: ClientSettings,
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    duration_filter: int | None,
) -> None:
    """List the transactional ids the broker coordinates."""
    answer = _request(
        client,
        ApiKey.LIST_TRANSACTIONS,
        1,
        {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "duration_filter": -1 if duration_filter is None else duration_filter,
        },
    )
    _check(answer["error_code"], "cannot list transactions")
    if answer["unknown_state_filters"]:
        click.echo(f"unknown states: {', '.join(answer['unknown_state_filters'])}", err=True)
    rows = [["TransactionalId", "ProducerId", "TransactionState"]]
    rows += [
        [t["transactional_id"], str(t["producer_id"]), t["transaction_state"]]
        for t in answer["transaction_states"]
    ]
    for line in text_table(rows):
        click.echo(line)


@transactions.command("describe")
@client_options
@click.argument("transactional_id")
def describe_transaction(client: ClientSettings, transactional_id: str) -> None:
    """Describe one transactional id: producer, state, timeout and partitions."""
    answer = _request(
        client,
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        {"transactional_ids": [transactional_id]},
    )
    (state,) = answer["transaction_states"]
    _check(state["error_code"], f"cannot describe {transactional_id}")
    start = state["transaction_start_time_ms"]
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    partitions = ",".join(
        f"{topic['topic']}-{p}" for topic in state["topics"] for p in topic["partitions"]
    )
    rows = [
        [
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            state["transactional_id"],
            str(state["producer_id"]),
            str(state["producer_epoch"]),
            state["transaction_state"],
            str(state["transaction_timeout_ms"]),
            str(start) if start >= 0 else "None",
            duration,
            partitions,
        ],
    ]
    for line in text_table(rows):
        click.echo(line)


def _describe_producers(
    client: ClientSettings, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each partition's active producers (DescribeProducers); a failed partition is an error."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    answer = _request(
        client,
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        {"topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]},
    )
    found: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for topic in answer["topics"]:
        for entry in topic["partitions"]:
            where = f"{topic['name']}-{entry['partition_index']}"
            _check(entry["error_code"], f"cannot describe the producers of {where}")
            found[(topic["name"], entry["partition_index"])] = entry["active_producers"]
    return found


def _metadata(client: ClientSettings, topics: list[str] | None) -> Any:
    """Metadata v4 (no auto-creation) of ``topics``, or of every topic for None."""
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
    }
    return _request(client, ApiKey.METADATA, 4, body)


def _leader(client: ClientSettings, topic: str, partition: int) -> str:
    """``host:port`` of the partition's leader."""
    answer = _metadata(client, [topic])
    (described,) = answer["topics"]
    _check(described["error_code"], f"cannot find {topic}")
    for entry in described["partitions"]:
        if entry["partition_index"] == partition:
            _check(entry["error_code"], f"cannot find the leader of {topic}-{partition}")
            for broker in answer["brokers"]:
                if broker["node_id"] == entry["leader_id"]:
                    return f"{broker['host']}:{broker['port']}"
            raise ClientError(f"{topic}-{partition} has no leader")
    raise ClientError(f"cannot find {topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION")


@transactions.command("abort")
@client_options
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", type=click.IntRange(min=0), required=True, help="The partition.")
@click.option(
    "--start-offset",
    type=click.IntRange(min=0),
    default=None,
    help="The first offset of the transaction to abort (its producer is looked up).",
)
@click.option("--producer-id", type=click.IntRange(min=0), default=None, help="Its producer id.")
@click.option(
    "--producer-epoch", type=click.IntRange(0, 32767), default=None, help="Its producer epoch."
)
@click.option("--coordinator-epoch", type=int, default=None, help="Its coordinator epoch.")
def abort_transaction(
    client: ClientSettings,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> None:
    """Abort a hanging transaction of one partition: an ABORT marker written by its leader.

    Name the transaction by its first offset (--start-offset, as find-hanging
    shows it), or by --producer-id, --producer-epoch and --coordinator-epoch.
    """
    if start_offset is None and producer_id is None:
        raise click.UsageError(
            "The transaction to abort must be identified either with --start-offset "
            "or with --producer-id, --producer-epoch, and --coordinator-epoch"
        )
    where = f"{topic}-{partition}"
    if start_offset is not None:
        producers = _describe_producers(client, [(topic, partition)])
        found = [
            p
            for p in producers[(topic, partition)]
            if p["current_txn_start_offset"] == start_offset
        ]
        if not found:
            raise ClientError(
                f"Could not find any open transactions starting at offset {start_offset} "
                f"on partition {where}"
            )
        producer_id = found[0]["producer_id"]
        producer_epoch = found[0]["producer_epoch"]
        coordinator_epoch = found[0]["coordinator_epoch"]
    elif producer_epoch is None:
        raise click.UsageError("Missing required argument --producer-epoch")
    elif coordinator_epoch is None:
        raise click.UsageError("Missing required argument --coordinator-epoch")
    assert producer_id is not None and producer_epoch is not None
    assert coordinator_epoch is not None
    # A producer that never saw a marker has coordinator epoch -1: 0 is at
    # most any coordinator's epoch, as Kafka's tool reasons.
    coordinator_epoch = max(coordinator_epoch, 0)
    leader = _leader(client, topic, partition)
    answer = _request(
        client,
        ApiKey.WRITE_TXN_MARKERS,
        1,
        {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        },
        address=leader,
    )
    what = (
        f"Failed to abort the transaction of producer {producer_id} "
        f"(epoch {producer_epoch}, coordinator epoch {coordinator_epoch}) in {where}"
    )
    for marker in answer["markers"]:
        for result in marker["topics"]:
            for entry in result["partitions"]:
                _check(entry["error_code"], what)


_HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]


def _partitions_to_search(
    client: ClientSettings,
    topic: str | None,
    partition: int | None,
    broker_id: int | None,
) -> list[tuple[str, int]]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    answer = _metadata(client, None if topic is None else [topic])
    found = []
    for described in answer["topics"]:
        _check(described["error_code"], f"cannot describe {described['name']}")
        for entry in described["partitions"]:
            if broker_id is None or broker_id in entry["replica_nodes"]:
                found.append((described["name"], entry["partition_index"]))
    return sorted(found)


@transactions.command("find-hanging")
@client_options
@click.option("--broker-id", type=int, default=None, help="Search this broker's partitions.")
@click.option("--topic", default=None, help="Search this topic's partitions.")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Only this partition.")
@click.option(
    "--max-transaction-timeout",
    type=click.IntRange(min=0),
    default=15,
    show_default=True,
    metavar="MINUTES",
    help="Only transactions idle for longer than this.",
)
def find_hanging(
    client: ClientSettings,
    broker_id: int | None,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout: int,
) -> None:
    """Find hanging transactions: open in a partition, unknown to their coordinator.

    A transaction is a candidate when its producer wrote nothing for more than
    --max-transaction-timeout minutes; it hangs when no transactional id holds
    its producer id, or when the id's current transaction does not include the
    partition (its coordinator will never write its marker). Abort one with
    ``seglog transactions abort``.
    """
    if topic is None and broker_id is None:
        raise click.UsageError(
            "The `find-hanging` command requires either --topic or --broker-id to limit "
            "the scope of the search"
        )
    if partition is not None and topic is None:
        raise click.UsageError("The --partition argument requires --topic to be provided")
    partitions = _partitions_to_search(client, topic, partition, broker_id)
    producers = _describe_producers(client, partitions) if partitions else {}
    now = int(time.time() * 1000)
    limit_ms = max_transaction_timeout * 60_000
    candidates = [
        (tp, p)
        for tp, active in sorted(producers.items())
        for p in active
        if p["current_txn_start_offset"] >= 0 and now - p["last_timestamp"] > limit_ms
    ]
    hanging = _hanging(client, candidates)
    rows = [list(_HANGING_HEADERS)]
    for (name, index), p in hanging:
        rows.append(
            [
                name,
                str(index),
                str(p["producer_id"]),
                str(p["producer_epoch"]),
                str(p["coordinator_epoch"]),
                str(p["current_txn_start_offset"]),
                str(p["last_timestamp"]),
                str((now - p["last_timestamp"]) // 60_000),
            ]
        )
    for line in text_table(rows):
        click.echo(line)


#: States in which the coordinator still writes markers to the transaction's partitions.
_MARKERS_EXPECTED = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


def _hanging(
    client: ClientSettings, candidates: list[tuple[tuple[str, int], dict[str, Any]]]
) -> list[tuple[tuple[str, int], dict[str, Any]]]:
    """The candidates whose coordinator does not expect to write their marker."""
    if not candidates:
        return []
    listed = _request(
        client,
        ApiKey.LIST_TRANSACTIONS,
        0,
        {
            "state_filters": [],
            "producer_id_filters": sorted({p["producer_id"] for _, p in candidates}),
        },
    )
    _check(listed["error_code"], "cannot list transactions")
    ids = {t["producer_id"]: t["transactional_id"] for t in listed["transaction_states"]}
    partitions: dict[str, set[tuple[str, int]] | None] = {}
    if ids:
        described = _request(
            client,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            {"transactional_ids": sorted(set(ids.values()))},
        )
        not_found = error_codes.code_for("TRANSACTIONAL_ID_NOT_FOUND")
        for state in described["transaction_states"]:
            tid = state["transactional_id"]
            if state["error_code"] == not_found:
                partitions[tid] = None
                continue
            _check(state["error_code"], f"cannot describe {tid}")
            if state["transaction_state"] not in _MARKERS_EXPECTED:
                partitions[tid] = None
                continue
            partitions[tid] = {(t["topic"], p) for t in state["topics"] for p in t["partitions"]}
    hanging = []
    for tp, producer in candidates:
        tid = ids.get(producer["producer_id"])
        expected = partitions.get(tid) if tid is not None else None
        # DescribeTransactions lists the partitions of the ongoing transaction and
        # those still waiting for a marker: any other cannot expect one.
        if expected is None or tp not in expected:
            hanging.append((tp, producer))
    return hanging


__all__ = ["transactions"]
