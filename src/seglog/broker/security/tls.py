"""TLS for SSL and SASL_SSL listeners, configured with Kafka's names in their PEM forms.

Settings (each may be given per listener, see :func:`.session.listener_value`):

- ``ssl.keystore.type=PEM`` and either ``ssl.keystore.location`` (one PEM file
  holding the private key and the certificate chain) or
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (the PEM text
  itself); ``ssl.key.password`` decrypts an encrypted key.
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` (a PEM file of
  CA certificates) or ``ssl.truststore.certificates`` (their PEM text): whom
  client certificates must chain to.
- ``ssl.client.auth``: ``none``, ``requested`` (a certificate is asked for
  and checked if sent) or ``required``.
- ``ssl.enabled.protocols`` (``TLSv1.2,TLSv1.3``) and ``ssl.cipher.suites``
  (IANA names as Java takes them, or OpenSSL names). Python's ``ssl`` cannot
  restrict TLS 1.3 suites: those are OpenSSL's defaults, all AEAD.

Java key stores (JKS, PKCS12) are refused: converting them is one
``keytool``/``openssl`` command, and reading them would need a Java-format
parser that has no place in this broker.

The principal of a client certificate is its subject as Java's
``X500Principal.getName()`` writes it (RFC 2253: most specific part first,
``CN=alice,OU=eng,O=example``), mapped by ``ssl.principal.mapping.rules``
(``DEFAULT`` keeps it whole; ``RULE:pattern/replacement/[LU]`` as Kafka
parses them).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from seglog.broker.security.session import listener_value
from seglog.config import BrokerConfig
from seglog.errors import InvalidConfigError

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}

# Java (IANA) names of the TLS 1.2 suites worth enabling, as OpenSSL names them.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}
_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)


def _store_type(config: BrokerConfig, listener: str, key: str) -> str:
    kind = str(listener_value(config, listener, key)).upper()
    if kind != "PEM":
        raise InvalidConfigError(
            f"{key}={kind} is not supported on listener {listener}: seglog reads PEM stores "
            f"only. Set {key}=PEM and convert the store, e.g. "
            "keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 "
            "-deststoretype PKCS12, then openssl pkcs12 -in store.p12 -out store.pem -nodes"
        )
    return kind


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The server-side TLS context of ``listener``; InvalidConfigError when misconfigured."""

    def value(key: str) -> Any:
        return listener_value(config, listener, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    location = value("ssl.keystore.location")
    chain = value("ssl.keystore.certificate.chain")
    key = value("ssl.keystore.key")
    password = value("ssl.key.password")
    if location is None and chain is None:
        raise InvalidConfigError(
            f"listener {listener} uses TLS but has no key store: set ssl.keystore.location "
            "(a PEM file with the key and the certificate chain) or "
            "ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    _store_type(config, listener, "ssl.keystore.type")
    try:
        if chain is not None:
            if key is None:
                raise InvalidConfigError(
                    "ssl.keystore.certificate.chain is set but ssl.keystore.key is not"
                )
            load_chain_text(context, str(chain), str(key), password)
        else:
            context.load_cert_chain(str(location), password=password)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfigError(
            f"cannot load the key store of listener {listener}: {exc}"
        ) from exc
    auth = str(value("ssl.client.auth")).lower()
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[auth]
    trust_location = value("ssl.truststore.location")
    trust_text = value("ssl.truststore.certificates")
    if trust_location is not None or trust_text is not None:
        _store_type(config, listener, "ssl.truststore.type")
        try:
            if trust_text is not None:
                context.load_verify_locations(cadata=normalize_pem(str(trust_text)))
            else:
                context.load_verify_locations(cafile=str(trust_location))
        except (OSError, ssl.SSLError) as exc:
            raise InvalidConfigError(
                f"cannot load the trust store of listener {listener}: {exc}"
            ) from exc
    elif auth != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    _set_protocols(context, listener, value("ssl.enabled.protocols"))
    _set_ciphers(context, listener, value("ssl.cipher.suites"))
    return context


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def normalize_pem(text: str) -> str:
    """PEM text as OpenSSL reads it, from a property value.

    A value in ``server.properties`` is often written on one line (or its line
    breaks became spaces): as Kafka's PEM reader does, only the blocks and
    their base64 matter; the base64 is rewrapped at 64 columns.
    """
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), "".join(match.group(2).split())
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise InvalidConfigError("no PEM block (-----BEGIN ...-----) in the value")
    return "\n".join(blocks) + "\n"


def load_chain_text(context: ssl.SSLContext, chain: str, key: str, password: Any) -> None:
    """Load PEM text: Python's ssl reads only files, so a private temporary one is used."""
    with tempfile.TemporaryDirectory(prefix="seglog-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(normalize_pem(key) + normalize_pem(chain))
        context.load_cert_chain(path, password=password)


def _set_protocols(context: ssl.SSLContext, listener: str, protocols: list[str]) -> None:
    versions = []
    for name in protocols:
        version = _PROTOCOLS.get(name)
        if version is None:
            raise InvalidConfigError(
                f"Invalid value {name} for configuration ssl.enabled.protocols on listener "
                f"{listener}: expected some of {', '.join(_PROTOCOLS)}"
            )
        versions.append(version)
    if not versions:
        raise InvalidConfigError(f"ssl.enabled.protocols is empty on listener {listener}")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def _set_ciphers(context: ssl.SSLContext, listener: str, suites: list[str]) -> None:
    if not suites:
        return  # OpenSSL's defaults, as Kafka takes the JVM's
    tls12 = [_IANA_TO_OPENSSL.get(name, name) for name in suites if name not in _TLS13_SUITES]
    if not tls12:
        return  # only TLS 1.3 suites named: those cannot be restricted from Python
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError as exc:
        raise InvalidConfigError(
            f"Invalid value {','.join(suites)} for configuration ssl.cipher.suites on listener "
            f"{listener}: no cipher suite can be selected ({exc})"
        ) from exc


# ------------------------------------------------------------------ principals

# Short names Java's X500Principal uses in RFC 2253 form; other attributes by OID name.
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_RFC2253_SPECIAL = re.compile(r'([,+"\\<>;])')


def _escape(value: str) -> str:
    return _RFC2253_SPECIAL.sub(r"\\\1", value)


def subject_dn(cert: dict[str, Any]) -> str:
    """The subject of a certificate (as ``getpeercert()`` gives it) in RFC 2253 form."""
    parts = []
    for rdn in reversed(cert.get("subject", ())):
        parts.append("+".join(f"{_SHORT_NAMES.get(n, n)}={_escape(v)}" for n, v in rdn))
    return ",".join(parts)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(self.replacement)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/"
    r"(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU])?)\s*(?:,|$)"
)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: a certificate's subject → the user name."""

    def __init__(self, rules: str) -> None:
        self._rules: list[_Rule] = []
        position = 0
        text = rules.strip()
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise InvalidConfigError(
                    f"Invalid value {rules} for configuration ssl.principal.mapping.rules: "
                    f"cannot parse the rule at {text[position:]!r}"
                )
            position = match.end()
            if match.group("default"):
                self._rules.append(_Rule(None))
            else:
                # Java's $1 in a replacement is Python's \g<1>.
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group("replacement"))
                self._rules.append(
                    _Rule(
                        re.compile(match.group("pattern")), replacement, match.group("case") or ""
                    )
                )
        if not self._rules:
            self._rules.append(_Rule(None))

    def principal(self, dn: str) -> str:
        """``User:<name>`` for a subject; ValueError when no rule applies (as Kafka)."""
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return f"User:{name}"
        raise ValueError(f"No rules apply to {dn}, rules {self._rules}")


def peer_principal(ssl_object: ssl.SSLObject | None, mapper: PrincipalMapper) -> str | None:
    """The principal of the client certificate of a TLS connection; None without one."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    return mapper.principal(subject_dn(cert))
