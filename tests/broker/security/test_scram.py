"""The SCRAM server and PLAIN exchanges refuse anything malformed cleanly (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.security.credentials import PlainUsers
from seglog.broker.security.sasl import AuthenticationFailed, _Plain
from seglog.broker.security.scram import ScramError, ScramServer, make_credential

CREDENTIAL = make_credential("SCRAM-SHA-256", "pw", 4096, b"salt")


@given(st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_scram_server_fails_only_with_scram_error(tokens: list[bytes]) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user, mechanism: CREDENTIAL)
    for token in tokens:
        try:
            answer = server.respond(token)
        except ScramError:
            return
        assert isinstance(answer, bytes)
    assert not server.complete  # nobody guesses a proof


@given(st.binary(max_size=100))
def test_plain_fails_only_with_authentication_failed(token: bytes) -> None:
    exchange = _Plain(PlainUsers('x required user_alice="secret";', None))
    try:
        exchange.respond(token)
    except AuthenticationFailed:
        return
    assert token.split(b"\0")[1:] == [b"alice", b"secret"]
    assert exchange.user == "alice"
