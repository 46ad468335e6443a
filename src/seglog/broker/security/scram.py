"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side.

Theory of operation
-------------------
A credential is what Kafka stores (and what a stolen file would reveal): the
salt, the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``
and ``ServerKey = HMAC(SaltedPassword, "Server Key")`` with
``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``. Neither the
password nor ``SaltedPassword`` is kept.

The exchange, one SaslAuthenticate round trip per step::

    client-first   n,,n=alice,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=4096
    client-final   c=biws,r=<both nonces>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>

With ``AuthMessage = client-first-bare + "," + server-first + "," +
client-final-without-proof``, the server checks
``H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`` and proves
it knows the credential with ``HMAC(ServerKey, AuthMessage)``.

:class:`ScramServer` is sans-I/O: tokens in, tokens out, a state table of
two steps. An unknown user goes through the same steps with a made-up
credential, so the answer does not tell whether the user exists (RFC 5802
section 9). :class:`ScramClient` is the other side, for seglog's own tools.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""SCRAM mechanism → hashlib name."""
MECHANISM_TYPES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""SCRAM mechanism → its code in DescribeUserScramCredentials/AlterUserScramCredentials."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
"""Kafka's bounds on SCRAM iterations (ScramMechanism's minIterations, and its maximum)."""
MAX_MESSAGE_BYTES = 8192
"""The longest SCRAM message read. A real one is a few hundred bytes (a name, two nonces, a
proof); refusing longer ones unread bounds what a stranger can make the broker parse."""
_UNKNOWN_USER_SECRET = os.urandom(32)
"""Keys the made-up salts of unknown users: stable per user for the process's life."""


class ScramError(Exception):
    """The exchange failed: bad message, unknown user or wrong password."""


@dataclass(frozen=True)
class ScramCredential:
    """What is stored for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, Any]:
        """The credential as JSON values (base64 for bytes)."""
        return {
            "salt": base64.b64encode(self.salt).decode(),
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScramCredential:
        """The inverse of :meth:`to_json`."""
        return cls(
            base64.b64decode(data["salt"]),
            base64.b64decode(data["stored_key"]),
            base64.b64decode(data["server_key"]),
            int(data["iterations"]),
        )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)`` (PBKDF2; SASLprep is not applied)."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential from a salted password (what AlterUserScramCredentials sends)."""
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", digest),
        iterations=iterations,
    )


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A fresh credential for ``password`` (a random salt unless one is given)."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def _attributes(message: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"invalid SCRAM attribute {part!r}")
        result.setdefault(name, value)
    return result


def _sasl_name(text: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign; any other ``=`` is bad."""
    decoded = text.replace("=2C", ",").replace("=3D", "=")
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid user name encoding")
    return decoded


def _made_up_credential(mechanism: str, user: str) -> ScramCredential:
    """A credential for an unknown user: the exchange fails at the proof, as for a bad password.

    Its salt is the same at each attempt for the same name, as a real user's
    is, so the answer does not tell that the user is unknown; no PBKDF2 is
    run for it, so guessing names costs the broker no more than guessing
    passwords.
    """
    digest = MECHANISMS[mechanism]
    salt = hmac.digest(_UNKNOWN_USER_SECRET, f"{mechanism}\0{user}".encode(), "sha256")
    size = hashlib.new(digest).digest_size
    return ScramCredential(salt, os.urandom(size), os.urandom(size), MIN_ITERATIONS)


class ScramServer:
    """The server side of one SCRAM exchange.

    ============  =================  ==========================  ============
    state         input              action                      next state
    ============  =================  ==========================  ============
    RECEIVE_FIRST client-first       look up user, answer first  RECEIVE_FINAL
    RECEIVE_FINAL client-final       verify proof, answer final  COMPLETE
    any           anything else      raise ScramError            FAILED
    ============  =================  ==========================  ============
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Any,
        *,
        nonce: str | None = None,
    ) -> None:
        """``lookup(user, mechanism)`` returns a :class:`ScramCredential` or None."""
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism]
        self._lookup = lookup
        # Alphanumeric, as Kafka makes it: librdkafka 2.0 mangles nonces with "+" or "/".
        self._server_nonce = nonce or os.urandom(20).hex()
        self._state = "RECEIVE_FIRST"
        self._credential: ScramCredential | None = None
        self._known = False
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self.user: str | None = None
        """The authenticated user once :attr:`complete`."""

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded."""
        return self._state == "COMPLETE"

    def respond(self, token: bytes) -> bytes:
        """The answer to the client's next message; ScramError when authentication fails."""
        state, self._state = self._state, "FAILED"
        if len(token) > MAX_MESSAGE_BYTES:
            raise ScramError(
                f"a SCRAM message of {len(token)} bytes is over the limit of {MAX_MESSAGE_BYTES}"
            )
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScramError("SCRAM messages are UTF-8") from exc
        if state == "RECEIVE_FIRST":
            answer = self._first(text)
            self._state = "RECEIVE_FINAL"
            return answer
        if state == "RECEIVE_FINAL":
            answer = self._final(text)
            self._state = "COMPLETE"
            return answer
        raise ScramError(f"unexpected SCRAM message in state {state}")

    def _first(self, text: str) -> bytes:
        # gs2-header: channel binding flag ("n" or "y"; "p=" is refused: there is
        # no channel binding here), then an optional authzid.
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise ScramError("invalid SCRAM client-first message")
        self._gs2 = f"{flag},{authzid},"
        attributes = _attributes(bare)
        if "m" in attributes:
            raise ScramError("SCRAM mandatory extensions are not supported")
        user = _sasl_name(attributes.get("n", ""))
        client_nonce = attributes.get("r", "")
        if not user or not client_nonce:
            raise ScramError("invalid SCRAM client-first message")
        if authzid and _sasl_name(authzid.removeprefix("a=")) != user:
            raise ScramError("authorization id must be the user name")
        credential = self._lookup(user, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = _made_up_credential(self.mechanism, user)
        self._credential = credential
        self.user = user
        self._first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message without a proof")
        attributes = _attributes(without_proof)
        binding = base64.b64encode(self._gs2.encode()).decode()
        if attributes.get("c") != binding:
            raise ScramError("SCRAM channel binding does not match")
        # Kafka checks only that the nonce ends with the server-first one, and
        # librdkafka before 2.1 sends the client nonce twice: accept that too.
        # The proof covers the message as sent, so nothing is weakened.
        if not attributes.get("r", "").endswith(self._nonce):
            raise ScramError("SCRAM nonce does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise ScramError("SCRAM proof is not base64") from exc
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(signature):
            raise ScramError("invalid SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(self._digest, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known:
            raise ScramError("invalid credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange (sans-I/O): :meth:`first`, :meth:`final`, :meth:`verify`.

    Refuses a server-first message whose nonce does not extend the client's, or whose
    iteration count is below Kafka's minimum, and a server-final message whose
    signature is wrong: the server must prove it knows the credential too.
    """

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism]
        self._password = password
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        """The client-first message."""
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message, with its proof, for the server-first one."""
        text = server_first.decode("utf-8", "replace")
        attributes = _attributes(text)
        if "e" in attributes:
            raise ScramError(f"the server refused: {attributes['e']}")
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("SCRAM nonce does not match")
        try:
            salt = base64.b64decode(attributes.get("s", ""), validate=True)
            iterations = int(attributes.get("i", ""))
        except ValueError as exc:
            raise ScramError("invalid SCRAM server-first message") from exc
        if iterations < MIN_ITERATIONS:
            raise ScramError(f"SCRAM iterations {iterations} below the minimum {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        credential = credential_from_salted(self.mechanism, salted, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server-final message's signature; ScramError if it is not the server's."""
        attributes = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attributes:
            raise ScramError(f"the server refused: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError as exc:
            raise ScramError("invalid SCRAM server-final message") from exc
        if not self._server_signature or not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("the server's SCRAM signature is wrong")
