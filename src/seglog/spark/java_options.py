"""Java client security settings, as users pass them to Spark, in librdkafka's names.

Spark's Kafka source takes the Java client's settings (``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.location`` ...); librdkafka names most of them the same
but not these:

==========================================  ==============================================
Java client (``kafka.`` prefix dropped)     librdkafka
==========================================  ==============================================
``sasl.jaas.config`` (Plain/ScramLoginModule ``sasl.username``, ``sasl.password``
username, password)
``ssl.truststore.location`` (PEM)           ``ssl.ca.location``
``ssl.truststore.certificates`` (PEM text)  ``ssl.ca.pem``
``ssl.keystore.location`` (PEM: key+chain)  ``ssl.certificate.location``, ``ssl.key.location``
``ssl.keystore.certificate.chain``/``key``  ``ssl.certificate.pem``, ``ssl.key.pem``
``ssl.endpoint.identification.algorithm=``  ``ssl.endpoint.identification.algorithm=none``
``ssl.keystore.type``/``truststore.type``   (dropped once checked to be PEM)
==========================================  ==============================================

Java key stores (JKS, PKCS12) are refused with a message saying how to
convert them: librdkafka reads PEM.
"""

from __future__ import annotations

from collections.abc import Mapping

from seglog.config import jaas_options

__all__ = ["librdkafka_settings"]


def _require_pem(settings: dict[str, str], key: str) -> None:
    # Java's default type is JKS: a store given without its type is one.
    kind = settings.pop(key, "JKS").strip().upper()
    if kind != "PEM":
        raise ValueError(
            f"kafka.{key}={kind} is not supported: seglog's Kafka client (librdkafka) reads PEM. "
            f"Convert the store (keytool -importkeystore ... -deststoretype PKCS12, then "
            f"openssl pkcs12 -nodes) and set kafka.{key}=PEM"
        )


def librdkafka_settings(kafka: Mapping[str, str]) -> dict[str, str]:
    """``kafka`` (Java client names) with the security settings renamed for librdkafka."""
    settings = dict(kafka)
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None:
        options = jaas_options(jaas)
        for java, native in (("username", "sasl.username"), ("password", "sasl.password")):
            if java in options:
                settings.setdefault(native, options[java])
    has_truststore = (
        "ssl.truststore.location" in settings or "ssl.truststore.certificates" in settings
    )
    has_keystore = (
        "ssl.keystore.location" in settings or "ssl.keystore.certificate.chain" in settings
    )
    if has_truststore:
        _require_pem(settings, "ssl.truststore.type")
    else:
        settings.pop("ssl.truststore.type", None)
    if has_keystore:
        _require_pem(settings, "ssl.keystore.type")
    else:
        settings.pop("ssl.keystore.type", None)
    if "ssl.truststore.location" in settings:
        settings.setdefault("ssl.ca.location", settings.pop("ssl.truststore.location"))
    if "ssl.truststore.certificates" in settings:
        settings.setdefault("ssl.ca.pem", settings.pop("ssl.truststore.certificates"))
    if "ssl.keystore.location" in settings:
        location = settings.pop("ssl.keystore.location")
        settings.setdefault("ssl.certificate.location", location)
        settings.setdefault("ssl.key.location", location)
    if "ssl.keystore.certificate.chain" in settings:
        settings.setdefault("ssl.certificate.pem", settings.pop("ssl.keystore.certificate.chain"))
    if "ssl.keystore.key" in settings:
        settings.setdefault("ssl.key.pem", settings.pop("ssl.keystore.key"))
    if settings.get("ssl.endpoint.identification.algorithm") == "":
        settings["ssl.endpoint.identification.algorithm"] = "none"
    # Java-only settings librdkafka would refuse as unknown.
    for key in ("ssl.truststore.password", "ssl.keystore.password", "ssl.protocol"):
        settings.pop(key, None)
    return settings
