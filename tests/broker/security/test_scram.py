"""The SCRAM server and client and PLAIN exchanges: RFC 7677's vector, and anything malformed
refused cleanly (Hypothesis)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.broker.security.credentials import PlainUsers
from seglog.broker.security.sasl import AuthenticationFailed, _Plain
from seglog.broker.security.scram import (
    MECHANISMS,
    ScramClient,
    ScramError,
    ScramServer,
    make_credential,
)

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


def test_scram_client_rfc7677_exchange() -> None:
    """RFC 7677 section 3's example from the client's side, byte for byte."""
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(sorted(MECHANISMS)),
    st.text(min_size=1, max_size=20).filter(lambda t: "\0" not in t),
    st.text(max_size=20),
)
def test_scram_client_and_server_agree(mechanism: str, user: str, password: str) -> None:
    """Any user name (commas and equals signs escaped) and password authenticates."""
    credential = make_credential(mechanism, password)
    server = ScramServer(mechanism, lambda name, _: credential if name == user else None)
    client = ScramClient(mechanism, user, password)
    client.verify(server.respond(client.final(server.respond(client.first()))))
    assert server.complete and server.user == user


def test_scram_client_with_a_wrong_password_is_refused_by_the_server() -> None:
    server = ScramServer("SCRAM-SHA-512", lambda name, _: make_credential("SCRAM-SHA-512", "a"))
    client = ScramClient("SCRAM-SHA-512", "alice", "b")
    with pytest.raises(ScramError, match="invalid credentials"):
        server.respond(client.final(server.respond(client.first())))


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        (b"r=someone-elses-nonce,s=c2FsdA==,i=4096", "nonce"),
        (b"r=N,s=c2FsdA==,i=4096", "nonce"),  # not extended by the server
        (b"r=Nmore,s=c2FsdA==,i=1", "iterations"),
        (b"r=Nmore,s=!!,i=4096", "server-first"),
        (b"r=Nmore,s=c2FsdA==,i=many", "server-first"),
        (b"e=unknown-user", "refused"),
        (b"garbage", "attribute"),
    ],
)
def test_scram_client_refuses_a_bad_server_first(server_first: bytes, reason: str) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="N")
    with pytest.raises(ScramError, match=reason):
        client.final(server_first)


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_scram_client_fails_only_with_scram_error(first: bytes, last: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="N")
    try:
        client.final(first)
        client.verify(last)
    except ScramError:
        return
    raise AssertionError("a made-up server passed the client's checks")
