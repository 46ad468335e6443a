"""Java Kafka client options (as jobs written for Spark's Kafka source set them) in librdkafka's
terms.

Spark hands every ``kafka.*`` option to the Java consumer or producer; seglog's
clients are librdkafka's, which shares many names with Java's but not all,
and cannot run Java code. :func:`translate` maps a job's options so that it
runs unchanged, and refuses, when the options are parsed (at ``load()`` or
when a write is planned), what has no librdkafka equivalent, saying what to
use instead:

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
=====================================  ==============================================

Names the two clients share (``security.protocol``, ``client.id``, ``acks``,
``compression.type``, ``linger.ms``, ``batch.size``, ``retries``,
``enable.idempotence``, ``fetch.*``, ``isolation.level``, ...) and every
librdkafka name pass through unchanged. Java settings of blocking calls that
librdkafka does not have (``max.block.ms``, ``default.api.timeout.ms``,
``max.poll.records``, ...) are dropped: librdkafka's calls do not block that
way. Refused: JKS and PKCS12 trust stores, JKS key stores, and any Java class
name (callback handlers, partitioners other than the default, login modules
other than those above).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["translate"]

# Java settings with no librdkafka counterpart whose absence changes nothing a
# job relies on (librdkafka does not block the caller, has no such limit, or
# always behaves as the setting asks).
_DROPPED = frozenset(
    {
        "max.block.ms",
        "default.api.timeout.ms",
        "max.poll.records",
        "auto.commit.interval.ms",
        "exclude.internal.topics",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.sample.window.ms",
        "metrics.recording.level",
    }
)

_RENAMED = {
    "sasl.mechanism": "sasl.mechanisms",
    "delivery.timeout.ms": "message.timeout.ms",
    "max.request.size": "message.max.bytes",
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


def translate(params: Mapping[str, str], *, producer: bool) -> dict[str, str]:
    """``kafka.*`` options (without the prefix) in librdkafka's terms; see the module docstring.

    Raises ValueError for what librdkafka cannot do, naming what to use instead.
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
    for key, value in params.items():
        if key in handled or key in _DROPPED:
            continue
        if key == "sasl.jaas.config":
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
        elif key.endswith((".class", ".classes")) and key != "partitioner.class":
            raise _refuse(
                f"Kafka option '{key}' names Java classes, which cannot run outside the JVM; "
                "remove it (librdkafka's options are accepted as kafka.<name>)."
            )
        else:
            out[key] = value
    return out
