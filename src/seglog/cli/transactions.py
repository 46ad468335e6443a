"""``seglog transactions``: list and describe transactions, like kafka-transactions.sh.

confluent-kafka has no admin call for transactions, so the command speaks the
two requests itself (ListTransactions, DescribeTransactions) over a plain
connection to the broker, encoded by :mod:`seglog.protocol`. One broker
is the coordinator of every transactional id, so no coordinator lookup is
needed. PLAINTEXT listeners only.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import click

from seglog.cli._client import DEFAULT_BOOTSTRAP, ClientError, text_table
from seglog.protocol import ApiKey, decode_response, encode_request, error_codes

_CLIENT_ID = "seglog-transactions"


def _exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ClientError("the broker closed the connection")
        out += chunk
    return bytes(out)


def _request(
    bootstrap: str, timeout: float, api: ApiKey, version: int, body: dict[str, Any]
) -> Any:
    """One request to the first bootstrap server, and its decoded answer."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as sock:
            payload = encode_request(api, version, 1, _CLIENT_ID, body)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", _exactly(sock, 4))
            _, answer = decode_response(api, version, memoryview(_exactly(sock, size)))
    except (OSError, ValueError) as exc:
        raise ClientError(f"cannot reach {bootstrap}: {exc}") from exc
    return answer


def _check(code: int, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {error_codes.name_for(code)}")


_connection = [
    click.option(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT",
        help="The broker to ask.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0.001),
        default=30.0,
        show_default=True,
        metavar="SECONDS",
        help="How long to wait for the broker.",
    ),
]


def _with_connection(func: Any) -> Any:
    for option in reversed(_connection):
        func = option(func)
    return func


@click.group("transactions")
def transactions() -> None:
    """List and describe transactions (like kafka-transactions.sh)."""


@transactions.command("list")
@_with_connection
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
    bootstrap_server: str,
    timeout: float,
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    duration_filter: int | None,
) -> None:
    """List the transactional ids the broker coordinates."""
    try:
        answer = _request(
            bootstrap_server,
            timeout,
            ApiKey.LIST_TRANSACTIONS,
            1,
            {
                "state_filters": list(states),
                "producer_id_filters": list(producer_ids),
                "duration_filter": -1 if duration_filter is None else duration_filter,
            },
        )
        _check(answer["error_code"], "cannot list transactions")
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
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
@_with_connection
@click.argument("transactional_id")
def describe_transaction(bootstrap_server: str, timeout: float, transactional_id: str) -> None:
    """Describe one transactional id: producer, state, timeout and partitions."""
    try:
        answer = _request(
            bootstrap_server,
            timeout,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            {"transactional_ids": [transactional_id]},
        )
        (state,) = answer["transaction_states"]
        _check(state["error_code"], f"cannot describe {transactional_id}")
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
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


__all__ = ["transactions"]
