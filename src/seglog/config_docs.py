"""The configuration reference page, generated from :mod:`seglog.config`'s tables.

``docs/configuration.md`` is this module's output and is never edited by hand::

    python -m seglog.config_docs > docs/configuration.md

A test compares the page with :func:`render`, so a setting added to, removed from
or changed in :data:`seglog.config.TOPIC_CONFIGS` or
:data:`seglog.config.BROKER_CONFIGS` fails the build until the page is generated
again. Names, types, defaults and ranges come from the tables; the one-line
descriptions below are the only hand-written part, and a setting without one is
still listed.
"""

from __future__ import annotations

import sys
from typing import Any

from seglog.config import (
    BROKER_CONFIGS,
    CONFIGS_BY_BROKER_NAME,
    TOPIC_CONFIGS,
    ConfigDef,
    Dynamic,
    Range,
    ValidList,
    ValidString,
    format_value,
)

COMMAND = "python -m seglog.config_docs > docs/configuration.md"

# One line per setting, what it is for. Kafka's documentation has the long form.
DESCRIPTIONS: dict[str, str] = {
    # topic configs
    "cleanup.policy": (
        "`delete` (retention by time and size), `compact` (keep the last value of each "
        "key), or both"
    ),
    "compression.type": "codec of stored batches; `producer` keeps what the producer sent",
    "delete.retention.ms": (
        "how long tombstones and aborted-transaction markers stay after compaction"
    ),
    "file.delete.delay.ms": "delay before a deleted segment's files are removed from disk",
    "flush.messages": "fsync after this many records (1: every batch, before the answer)",
    "flush.ms": "fsync when the oldest unflushed record is this old",
    "index.interval.bytes": "bytes of records between two offset-index entries",
    "key.index.enable": (
        "seglog's: keep a key index (`.keyindex`) per segment, for lookups by key "
        "(`seglog find`); turned on, existing segments are indexed in the background, "
        "turned off, the files go"
    ),
    "max.compaction.lag.ms": "longest time a record may stay uncompacted",
    "max.message.bytes": "largest record batch accepted",
    "message.timestamp.type": "`CreateTime` (the producer's) or `LogAppendTime` (the broker's)",
    "message.timestamp.before.max.ms": "how far in the past a CreateTime timestamp may be",
    "message.timestamp.after.max.ms": "how far in the future a CreateTime timestamp may be",
    "min.cleanable.dirty.ratio": (
        "share of uncompacted bytes that makes a log eligible for compaction"
    ),
    "min.compaction.lag.ms": "shortest time a record stays uncompacted",
    "preallocate": "accepted for compatibility",
    "retention.bytes": "largest size of a partition before old segments go (-1: no limit)",
    "retention.ms": "age after which segments go (-1: no limit)",
    "segment.bytes": "size at which a segment rolls (at least 1 MiB, as in Kafka 4)",
    "internal.segment.bytes": "smaller segments than `segment.bytes` allows, for tests",
    "segment.index.bytes": "largest size of a segment's offset and time index files",
    "segment.jitter.ms": "random jitter subtracted from `segment.ms`",
    "segment.ms": "age at which a segment rolls",
    # node, listeners, directories
    "node.id": "this broker's id (node i of `--nodes` has `node.id` + i)",
    "broker.id": "older name of `node.id`, used when given",
    "cluster.id": "the cluster id (else taken from or written to `meta.properties`)",
    "listeners": "where to listen: `NAME://host:port`, comma-separated",
    "advertised.listeners": "the addresses clients are told, per listener (default: `listeners`)",
    "listener.security.protocol.map": "listener name to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    "log.dir": "the log directory, used when `log.dirs` is not given",
    "log.dirs": "the log directory (one)",
    "metrics.port": (
        "serve Prometheus metrics at `/metrics` on this port (see [metrics](metrics.md))"
    ),
    "metrics.host": "the address the metrics page binds (`0.0.0.0` for every interface)",
    "console.port": (
        "serve the HTTP API (`/v1/...`, lookup by key; see [http-api](http-api.md)) on this "
        "port; node i of `--nodes` on this port + i"
    ),
    "console.host": "the address the HTTP API binds",
    "console.write.enable": (
        "let the HTTP API write (produce a test record, reset a group's offsets); "
        "off, those routes answer 403 whatever the ACLs allow"
    ),
    "nodes": "broker processes over the one log directory (`auto`: one per core)",
    "auto.create.topics.enable": "create a topic when a client asks for one that does not exist",
    "num.partitions": "partitions of an automatically created topic",
    "background.threads": "accepted for compatibility (seglog has no such thread pool)",
    "num.io.threads": "accepted for compatibility (seglog has no such thread pool)",
    "num.network.threads": "accepted for compatibility (seglog has no such thread pool)",
    "num.replica.fetchers": "accepted for compatibility (seglog does not replicate)",
    "num.recovery.threads.per.data.dir": "accepted for compatibility",
    "log.cleaner.threads": "accepted for compatibility (one cleaner thread)",
    "log.cleaner.io.buffer.size": "accepted for compatibility",
    "log.cleaner.io.buffer.load.factor": "accepted for compatibility",
    "max.connection.creation.rate": "accepted for compatibility",
    "sasl.kerberos.service.name": "accepted for compatibility (GSSAPI is not served)",
    "sasl.kerberos.min.time.before.relogin": "accepted for compatibility (GSSAPI is not served)",
    "sasl.kerberos.ticket.renew.jitter": "accepted for compatibility (GSSAPI is not served)",
    "sasl.kerberos.ticket.renew.window.factor": (
        "accepted for compatibility (GSSAPI is not served)"
    ),
    # network limits
    "socket.request.max.bytes": "largest request frame; a larger one closes the connection",
    "connections.max.idle.ms": "close idle, stalled or non-reading connections after this",
    "max.connections": "most connections at once",
    "max.connections.per.ip": "most connections from one address",
    "max.connections.per.ip.overrides": "per-address exceptions, `host:count,...`",
    "queued.max.request.bytes": (
        "bytes of requests read or waiting, over all connections (<= 0: no bound)"
    ),
    "queued.max.requests": "accepted for compatibility",
    # security
    "sasl.enabled.mechanisms": "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    "sasl.jaas.config": 'JAAS entry; PLAIN users as `user_NAME="password"` options',
    "sasl.plain.users.file": "a file of PLAIN users, `name=password` lines, reread on change",
    "connections.max.reauth.ms": "SASL re-authentication interval (KIP-368; 0: never)",
    "connection.failed.authentication.delay.ms": (
        "delay before answering (then closing) a connection that failed to authenticate"
    ),
    "sasl.server.authentication.timeout.ms": (
        "seglog's: a SASL connection not authenticated this long after it was accepted is closed"
    ),
    "sasl.server.max.receive.size": (
        "largest frame accepted from a client that has not authenticated yet"
    ),
    "authorizer.class.name": (
        "set to `org.apache.kafka.metadata.authorizer.StandardAuthorizer` to enforce ACLs"
    ),
    "super.users": "principals allowed everything, `User:a;User:b`",
    "allow.everyone.if.no.acl.found": "allow access to resources that have no ACL",
    "ssl.protocol": "accepted for compatibility (`ssl.enabled.protocols` chooses the versions)",
    "ssl.enabled.protocols": "TLS versions accepted",
    "ssl.cipher.suites": "TLS 1.2 cipher suites, Java (IANA) or OpenSSL names",
    "ssl.client.auth": "`required` or `requested` for mutual TLS",
    "ssl.principal.mapping.rules": "how a client certificate's subject becomes a principal",
    "ssl.keystore.type": "`PEM` (JKS is refused: convert it)",
    "ssl.truststore.type": "`PEM`",
    "ssl.keystore.location": "PEM file with the private key and certificate chain",
    "ssl.keystore.password": "password of the key store",
    "ssl.key.password": "password of an encrypted private key",
    "ssl.keystore.key": "the private key inline (PEM text)",
    "ssl.keystore.certificate.chain": "the certificate chain inline (PEM text)",
    "ssl.truststore.location": "PEM file of the CAs that sign client certificates",
    "ssl.truststore.password": "password of the trust store",
    "ssl.truststore.certificates": "the trusted CAs inline (PEM text)",
    # coarse synonyms
    "log.retention.minutes": "`log.retention.ms` in minutes (the finest one given wins)",
    "log.retention.hours": "`log.retention.ms` in hours (the finest one given wins)",
    "log.roll.hours": "`log.roll.ms` in hours",
    "log.roll.jitter.hours": "`log.roll.jitter.ms` in hours",
    # storage engine
    "log.retention.check.interval.ms": "how often retention runs",
    "log.flush.offset.checkpoint.interval.ms": (
        "how often `recovery-point-offset-checkpoint` is written"
    ),
    "log.flush.start.offset.checkpoint.interval.ms": (
        "how often `log-start-offset-checkpoint` is written"
    ),
    "log.flush.scheduler.interval.ms": "how often `flush.ms` is checked",
    "log.cleaner.enable": "run the compaction cleaner",
    "log.cleaner.backoff.ms": "sleep of the cleaner when nothing is cleanable",
    "log.cleaner.dedupe.buffer.size": "memory for the cleaner's key map",
    "log.cleaner.io.max.bytes.per.second": "accepted for compatibility",
    "producer.id.expiration.ms": "forget an idle idempotent producer after this",
    "producer.id.expiration.check.interval.ms": "how often idle producers are looked for",
    # group coordinator
    "group.initial.rebalance.delay.ms": (
        "wait for more members before the first rebalance of a group"
    ),
    "group.min.session.timeout.ms": "smallest session timeout a member may ask for",
    "group.max.session.timeout.ms": "largest session timeout a member may ask for",
    "group.max.size": "most members of a group",
    "group.consumer.session.timeout.ms": "session timeout of KIP-848 consumer groups",
    "group.consumer.heartbeat.interval.ms": "heartbeat interval given to KIP-848 members",
    "group.consumer.min.session.timeout.ms": "least `consumer.session.timeout.ms` of a group",
    "group.consumer.max.session.timeout.ms": "most `consumer.session.timeout.ms` of a group",
    "group.consumer.min.heartbeat.interval.ms": (
        "least `consumer.heartbeat.interval.ms` of a group"
    ),
    "group.consumer.max.heartbeat.interval.ms": "most `consumer.heartbeat.interval.ms` of a group",
    "group.share.session.timeout.ms": "default `share.session.timeout.ms` of a group",
    "group.share.min.session.timeout.ms": "least `share.session.timeout.ms` of a group",
    "group.share.max.session.timeout.ms": "most `share.session.timeout.ms` of a group",
    "group.share.heartbeat.interval.ms": "default `share.heartbeat.interval.ms` of a group",
    "group.share.min.heartbeat.interval.ms": "least `share.heartbeat.interval.ms` of a group",
    "group.share.max.heartbeat.interval.ms": "most `share.heartbeat.interval.ms` of a group",
    "group.share.record.lock.duration.ms": "default `share.record.lock.duration.ms` of a group",
    "group.share.min.record.lock.duration.ms": ("least `share.record.lock.duration.ms` of a group"),
    "group.share.max.record.lock.duration.ms": "most `share.record.lock.duration.ms` of a group",
    "offsets.retention.minutes": "keep committed offsets this long (see operations)",
    "offsets.retention.check.interval.ms": "how often expired offsets are looked for",
    "offset.metadata.max.bytes": "largest metadata string of a committed offset",
    "offsets.topic.num.partitions": "partitions of `__consumer_offsets` (fixed once it exists)",
    "offsets.topic.segment.bytes": "segment size of `__consumer_offsets`",
    "offsets.topic.replication.factor": "accepted for compatibility (one replica)",
    # share coordinator
    "share.coordinator.state.topic.num.partitions": (
        "partitions of `__share_group_state` (fixed once it exists)"
    ),
    "share.coordinator.state.topic.segment.bytes": "segment size of `__share_group_state`",
    "share.coordinator.snapshot.update.records.per.snapshot": (
        "updates of a share-partition's state between two snapshots of it"
    ),
    "share.coordinator.cold.partition.snapshot.interval.ms": (
        "snapshot a share-partition's state again when its snapshot is this old"
    ),
    "share.coordinator.state.topic.prune.interval.ms": (
        "how often `__share_group_state` is pruned below the records still needed"
    ),
    # transaction coordinator
    "transaction.max.timeout.ms": "largest `transaction.timeout.ms` a producer may ask for",
    "transaction.state.log.num.partitions": "partitions of `__transaction_state`",
    "transaction.state.log.segment.bytes": "segment size of `__transaction_state`",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "how often timed-out transactions are aborted"
    ),
    "transactional.id.expiration.ms": "forget an idle transactional id after this",
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "how often idle transactional ids are looked for"
    ),
}

_HEADER = f"""\
# Configuration reference

<!-- Generated by `{COMMAND}` from
src/seglog/config.py. Do not edit: change the table or seglog/config_docs.py and
run the command again (tests/test_docs.py checks the page matches). -->

Every setting seglog reads, with Kafka's name, type, default and valid values. A broker
takes them from a `server.properties` file and `--override name=value` (see
[operations.md](operations.md) and the sample `config/server.properties`); topics take the
topic configs at creation (`seglog topics create T --config retention.ms=3600000`) or later
(`seglog topics alter`, or any Kafka admin client). A value outside its range is refused with
Kafka's message and INVALID_CONFIG (CreateTopics, IncrementalAlterConfigs), e.g.
`Invalid value 0 for configuration segment.ms: Value must be at least 1`, and a broker given
one refuses to start, e.g. `Invalid value 1099511627776 for configuration segment.bytes: Not
a number of type INT`. As in Kafka 4.0, `segment.bytes` is at least 1 MiB; the internal
`internal.segment.bytes` (and broker-level `internal.log.segment.bytes`) allow smaller
segments for tests. Every `ssl.*` and `sasl.*` setting may also be given per listener, as
`listener.name.<listener>.<setting>` (see [security.md](security.md)). DescribeConfigs
answers secrets (PASSWORD settings such as `ssl.keystore.password` and `sasl.jaas.config`,
and any setting seglog does not know) with a null value and `is_sensitive=true`.
"""


def _default(definition: ConfigDef) -> str:
    text = format_value(definition.type, definition.default)
    if text is None:
        return "(none)"
    if text == "":
        return '`""`'
    return f"`{text}`"


def _valid(definition: ConfigDef) -> str:
    validator: Any = definition.validator
    if isinstance(validator, Range):
        low = None if validator.min is None else _number(validator.min)
        high = None if validator.max is None else _number(validator.max)
        if low is not None and high is not None:
            return f"[{low}, ..., {high}]"
        if low is not None:
            return f"[{low}, ...]"
        return f"[..., {high}]"
    if isinstance(validator, ValidString):
        return ", ".join(f"`{c}`" for c in validator.choices)
    if isinstance(validator, ValidList):
        return "list of " + ", ".join(f"`{c}`" for c in validator.choices)
    return ""


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The whole ``docs/configuration.md`` page."""
    lines = [_HEADER]
    lines.append("## Topic configs\n")
    lines.append(
        "Set per topic; the broker-level synonym sets the default for every topic that does"
        "\nnot override it, and can also be changed while the broker runs (see [Changing"
        "\nconfigs at run time](configs.md)). Internal settings are for tests and are never"
        "\ndescribed.\n"
    )
    lines.append("| topic config | broker synonym | type | default | valid values | what it does |")
    lines.append("|---|---|---|---|---|---|")
    for definition in TOPIC_CONFIGS:
        name = f"`{definition.name}`" + (" (internal)" if definition.internal else "")
        lines.append(
            _row(
                [
                    name,
                    f"`{definition.broker_name}`",
                    definition.type.value,
                    _default(definition),
                    _valid(definition),
                    DESCRIPTIONS.get(definition.name, ""),
                ]
            )
        )
    lines.append("")
    lines.append("## Broker settings\n")
    lines.append(
        "Read at start; those marked *dynamic* can also be changed while the broker runs,"
        "\ncluster-wide or per broker (see [Changing configs at run time](configs.md)). The"
        "\ntopic configs' broker synonyms are in the table above.\n"
    )
    lines.append("| setting | type | default | valid values | what it does |")
    lines.append("|---|---|---|---|---|")
    for name, definition in BROKER_CONFIGS.items():
        if name in CONFIGS_BY_BROKER_NAME:
            continue
        shown = f"`{name}`" + (" (internal)" if definition.internal else "")
        if definition.dynamic is Dynamic.CLUSTER_WIDE:
            shown += " (*dynamic*)"
        elif definition.dynamic is Dynamic.PER_BROKER:
            shown += " (*dynamic*, per broker)"
        lines.append(
            _row(
                [
                    shown,
                    definition.type.value,
                    _default(definition),
                    _valid(definition),
                    DESCRIPTIONS.get(name, ""),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write the page to standard output."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
