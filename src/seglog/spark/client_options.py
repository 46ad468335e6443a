"""Java Kafka client options (as jobs written for Spark's Kafka source set them) in librdkafka's
terms.

Spark hands every ``kafka.*`` option to the Java consumer or producer; seglog's
clients are librdkafka's, which shares many names with Java's but not all,
and cannot run Java code. :func:`translate` maps a job's options so that it
runs unchanged, drops (with a warning) the Java-only settings whose absence
changes nothing a job relies on, and refuses, when the options are parsed (at
``load()`` or when a write is planned), what has no librdkafka equivalent and
matters, saying what to use instead:

=====================================  ==============================================
Java option                            librdkafka
=====================================  ==============================================
``sasl.jaas.config`` (Plain, Scram)    ``sasl.username``, ``sasl.password``
``sasl.jaas.config`` (Krb5)            ``sasl.kerberos.keytab``, ``.principal``
``sasl.mechanism``                     ``sasl.mechanisms``
``ssl.truststore.*`` (type PEM)        ``ssl.ca.location`` / ``ssl.ca.pem``
``ssl.keystore.*`` (type PKCS12)       ``ssl.keystore.location``/``.password``
``ssl.keystore.*`` (type PEM)          ``ssl.certificate.*``, ``ssl.key.*``
``ssl.endpoint.identification.``       ``ssl.endpoint.identification.algorithm``
``algorithm`` ("" = off)               (``none`` = off)
``delivery.timeout.ms``                ``message.timeout.ms``
``buffer.memory``                      ``queue.buffering.max.kbytes``
``max.request.size``                   ``message.max.bytes``
``send/receive.buffer.bytes``          ``socket.send/receive.buffer.bytes``
``request.timeout.ms`` (consumer)      ``socket.timeout.ms``
``partitioner.class`` (Java default)   ``partitioner=murmur2_random``
``fetch.max.wait.ms``                  ``fetch.wait.max.ms``
=====================================  ==============================================

Names the two clients share (``security.protocol``, ``client.id``, ``acks``,
``compression.type``, ``linger.ms``, ``batch.size``, ``retries``,
``enable.idempotence``, ``fetch.*``, ``isolation.level``, ...) and every
librdkafka name pass through unchanged; Java assignor classes in
``partition.assignment.strategy`` become librdkafka's names (``range``,
``roundrobin``, ``cooperative-sticky``).

A Java client setting that librdkafka has no counterpart for (the settings of
Java's blocking calls such as ``max.block.ms``, ``security.providers``,
``ssl.provider``, a serializer where none is used, any Java class such as a
callback handler or an interceptor, ...) is dropped with one warning naming
it, as the Java client warns about a setting it does not use and carries on:
a job written for Spark's Kafka source keeps running. ``default.api.timeout.ms``
is dropped silently: :mod:`seglog.spark.options` reads it (it bounds the wait
for a broker). Refused, because dropping them would change what is written or
who connects: JKS and PKCS12 trust stores, JKS key stores, a partitioner other
than Java's default, and login modules other than those above.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

__all__ = ["translate"]

# Java client settings librdkafka has no property for (librdkafka 2.x answers
# "No such configuration property"), or has but for what seglog's reads do not
# use (auto commit, poll sizes): dropped with a warning. Settings naming Java
# classes are caught by their ``.class``/``.classes`` suffix.
_IGNORED = frozenset(
    {
        "auto.include.jmx.reporter",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "exclude.internal.topics",
        "key.deserializer",
        "key.serializer",
        "max.block.ms",
        "max.poll.records",
        "metadata.max.idle.ms",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "partitioner.ignore.keys",
        "auto.commit.interval.ms",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.scope.claim.name",
        "security.providers",
        "socket.connection.setup.timeout.max.ms",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "value.deserializer",
        "value.serializer",
    }
)

# Read by seglog.spark.options (the bound on waiting for a broker), so dropped
# here without a warning.
_READ_ELSEWHERE = frozenset({"default.api.timeout.ms"})

# The Java consumer's assignors that librdkafka has under another name.
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}

_log = logging.getLogger(__name__)
# Sets of dropped names already warned about in this process: options are parsed
# more than once per query (at load(), at planning), one warning is enough.
_warned: set[frozenset[str]] = set()

_RENAMED = {
    "sasl.mechanism": "sasl.mechanisms",
    "delivery.timeout.ms": "message.timeout.ms",
    "max.request.size": "message.max.bytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}

# The Java producer's default partitioners: murmur2 of the key, sticky without one.
_JAVA_DEFAULT_PARTITIONERS = frozenset(
    {
        "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
        "org.apache.kafka.clients.producer.internals.BuiltInPartitioner",
    }
)

_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "plain",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "scram",
    "com.sun.security.auth.module.Krb5LoginModule": "kerberos",
}
_JAAS = re.compile(r"\s*(\S+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')


def _refuse(message: str) -> ValueError:
    return ValueError(message)


def _parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``Module flag key="value" ...;`` → (module, options)."""
    match = _JAAS.fullmatch(text.strip())
    if match is None:
        raise _refuse(
            f"Kafka option 'sasl.jaas.config' could not be read: {text!r}. Expected e.g. "
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
            'password="p";'
        )
    module, _, rest = match.groups()
    options: dict[str, str] = {}
    position = 0
    rest = rest.strip()
    while position < len(rest):
        option = _JAAS_OPTION.match(rest, position)
        if option is None:
            raise _refuse(
                f"Kafka option 'sasl.jaas.config' could not be read at: {rest[position:]!r}"
            )
        key, quoted, bare = option.groups()
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        position = option.end()
    return module, options


def _jaas(text: str) -> dict[str, str]:
    module, options = _parse_jaas(text)
    kind = _JAAS_MODULES.get(module)
    if kind in ("plain", "scram"):
        if "username" not in options or "password" not in options:
            raise _refuse(f"Kafka option 'sasl.jaas.config': {module} needs username and password")
        return {"sasl.username": options["username"], "sasl.password": options["password"]}
    if kind == "kerberos":
        out = {}
        if "keyTab" in options:
            out["sasl.kerberos.keytab"] = options["keyTab"]
        if "principal" in options:
            out["sasl.kerberos.principal"] = options["principal"]
        return out
    raise _refuse(
        f"Kafka option 'sasl.jaas.config' names the Java login module {module}, which cannot "
        "run outside the JVM. Use PlainLoginModule or ScramLoginModule with username and "
        "password, Krb5LoginModule with keyTab and principal, or librdkafka's own options "
        "(kafka.sasl.username, kafka.sasl.password, kafka.sasl.oauthbearer.*)."
    )


def _truststore(params: Mapping[str, str], out: dict[str, str]) -> None:
    kind = params.get("ssl.truststore.type", "JKS").strip().upper()
    location = params.get("ssl.truststore.location")
    certificates = params.get("ssl.truststore.certificates")
    if location is None and certificates is None:
        return
    if kind != "PEM":
        raise _refuse(
            f"Kafka option 'ssl.truststore.type' {kind} is not supported: a {kind} trust store "
            "is a Java format. Convert it to PEM (keytool -exportcert -rfc) and set "
            "kafka.ssl.truststore.type=PEM with kafka.ssl.truststore.location, or set "
            "kafka.ssl.ca.location."
        )
    if location is not None:
        out["ssl.ca.location"] = location
    if certificates is not None:
        out["ssl.ca.pem"] = certificates


def _keystore(params: Mapping[str, str], out: dict[str, str]) -> None:
    kind = params.get("ssl.keystore.type", "JKS").strip().upper()
    location = params.get("ssl.keystore.location")
    chain = params.get("ssl.keystore.certificate.chain")
    key = params.get("ssl.keystore.key")
    if location is None and chain is None and key is None:
        return
    if kind == "PKCS12":
        if location is not None:
            out["ssl.keystore.location"] = location
        if "ssl.keystore.password" in params:
            out["ssl.keystore.password"] = params["ssl.keystore.password"]
        return
    if kind == "PEM":
        if location is not None:
            # A PEM key store holds the key and its certificate chain in one file.
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        if chain is not None:
            out["ssl.certificate.pem"] = chain
        if key is not None:
            out["ssl.key.pem"] = key
        return
    raise _refuse(
        f"Kafka option 'ssl.keystore.type' {kind} is not supported: a {kind} key store is a "
        "Java format. Convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12) "
        "and set kafka.ssl.keystore.type=PKCS12, or use PEM files (kafka.ssl.keystore.type="
        "PEM, or kafka.ssl.certificate.location and kafka.ssl.key.location)."
    )


def _partitioner(value: str) -> str:
    name = value.strip()
    if name in _JAVA_DEFAULT_PARTITIONERS:
        return "murmur2_random"
    raise _refuse(
        f"Kafka option 'partitioner.class' {name} is a Java class, which cannot run outside "
        "the JVM. Write a 'partition' column to choose partitions, or set kafka.partitioner "
        "to one of librdkafka's (murmur2_random, the Java default, is used when unset; "
        "random, consistent, consistent_random, murmur2, fnv1a, fnv1a_random)."
    )


def _assignors(value: str) -> str | None:
    """librdkafka's names for a list of Java assignors; None when one has no equivalent."""
    names = [_ASSIGNORS.get(name.strip()) for name in value.split(",") if name.strip()]
    if not names or None in names:
        return None
    # librdkafka refuses a list that mixes eager and cooperative assignors, which Java
    # allows (its default is range then cooperative-sticky, to upgrade later): keep those
    # of the first one's kind, the one a group of such members uses.
    kinds = [name == "cooperative-sticky" for name in names]
    return ",".join(n for n, kind in zip(names, kinds, strict=True) if n and kind == kinds[0])


def _warn_ignored(ignored: list[str]) -> None:
    key = frozenset(ignored)
    if not ignored or key in _warned:
        return
    _warned.add(key)
    _log.warning(
        "Kafka options ignored: %s. They are Java client settings that librdkafka, "
        "seglog's Kafka client, has no equivalent for (the Java client likewise warns "
        "about settings it does not use and carries on).",
        ", ".join(f"kafka.{name}" for name in sorted(ignored)),
    )


def translate(params: Mapping[str, str], *, producer: bool) -> dict[str, str]:
    """``kafka.*`` options (without the prefix) in librdkafka's terms; see the module docstring.

    Raises ValueError for what librdkafka cannot do, naming what to use instead; logs one
    warning naming the Java-only settings it drops.
    """
    out: dict[str, str] = {}
    handled = set()
    _truststore(params, out)
    _keystore(params, out)
    handled |= {
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    }
    ignored: list[str] = []
    for key, value in params.items():
        if key in handled or key in _READ_ELSEWHERE:
            continue
        if key in _IGNORED:
            ignored.append(key)
        elif key == "sasl.jaas.config":
            out.update(_jaas(value))
        elif key == "partitioner.class":
            out["partitioner"] = _partitioner(value)
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.strip().lower() or "none"
        elif key == "buffer.memory":
            if not value.strip().isdigit():
                raise _refuse(f"Invalid value '{value}' for Kafka option 'buffer.memory'")
            out["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024))
        elif key == "request.timeout.ms" and not producer:
            out["socket.timeout.ms"] = value
        elif key in _RENAMED:
            out[_RENAMED[key]] = value
        elif key == "partition.assignment.strategy":
            assignors = _assignors(value)
            if assignors is None:
                ignored.append(key)
            else:
                out[key] = assignors
        elif key.endswith((".class", ".classes")):
            # Java classes (callback handlers, interceptors, engine factories) cannot run here.
            ignored.append(key)
        else:
            out[key] = value
    _warn_ignored(ignored)
    return out
