"""Failed authentications: every one counted, few logged; SCRAM's work bounded."""

from __future__ import annotations

import logging

import pytest

from seglog.broker.security import failures as failures_module
from seglog.broker.security.failures import OTHER, AuthenticationFailures
from seglog.broker.security.scram import MAX_MESSAGE_BYTES, ScramError, ScramServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == failures_module.__name__]


def test_failures_are_all_counted_but_logged_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failures = AuthenticationFailures(interval_seconds=10, clock=clock)
    with caplog.at_level(logging.INFO, logger=failures_module.__name__):
        for _ in range(500):
            failures.record("SASL_SSL", "User:bob", "10.0.0.1", "PLAIN", "bad password")
        failures.record("OTHER_LISTENER", None, "10.0.0.2", "SCRAM-SHA-256", "invalid proof")
        assert len(_lines(caplog)) == 2  # one per listener
        clock.now += 10
        failures.record("SASL_SSL", "User:eve", "10.0.0.3", "PLAIN", "bad password")
    lines = _lines(caplog)
    assert len(lines) == 3
    assert "499 more failed authentication(s) on this listener were not logged" in lines[2]
    assert failures.counts() == {
        ("SASL_SSL", "User:bob"): 500,
        ("OTHER_LISTENER", OTHER): 1,
        ("SASL_SSL", "User:eve"): 1,
    }


def test_a_guesser_of_names_cannot_grow_the_counts_without_end() -> None:
    failures = AuthenticationFailures(clock=Clock())
    for n in range(failures_module.MAX_PRINCIPALS + 50):
        failures.record("L", f"User:u{n}", "h", "PLAIN", "no such user")
    counts = failures.counts()
    assert len(counts) == failures_module.MAX_PRINCIPALS + 1
    assert counts[("L", OTHER)] == 50


def test_an_over_long_scram_message_is_refused_unparsed() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user, mechanism: None)
    with pytest.raises(ScramError, match="over the limit"):
        server.respond(b"n,,n=bob,r=x" + b",x=" * MAX_MESSAGE_BYTES)


def test_an_unknown_user_gets_the_same_salt_each_time() -> None:
    """The answer must not tell that the user does not exist: a real user's salt is stable."""

    def first(user: str) -> bytes:
        server = ScramServer("SCRAM-SHA-512", lambda user, mechanism: None)
        return server.respond(f"n,,n={user},r=abc".encode())

    def salt(answer: bytes) -> str:
        return dict(part.split("=", 1) for part in answer.decode().split(","))["s"]

    assert salt(first("ghost")) == salt(first("ghost"))
    assert salt(first("ghost")) != salt(first("phantom"))
