"""Client commands say at once, in one line, why they cannot talk to the broker.

Each run is a real ``seglog`` process against a real broker (a PLAINTEXT and a
SASL_SSL listener, a SCRAM user), given ``--timeout 60``: ending well before
that with the cause shows it did not wait for librdkafka's request timeout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import Certs, certs
from tests.broker.security.test_sasl import add_scram_user, sasl_settings

__all__ = ["certs"]

LONG = "60"
"""The --timeout given: far above what any of these failures may take."""
PROMPT = 20.0
"""Seconds within which a failure must be reported (the old hang took 31)."""


class Secured:
    """The broker: PLAINTEXT on ``plain``, SASL_SSL on ``tls`` (user alice)."""

    def __init__(self, process: BrokerProcess, tls_port: int, certs: Certs) -> None:
        self.process = process
        self.plain = process.bootstrap
        self.tls = f"127.0.0.1:{tls_port}"
        self.certs = certs


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Secured]:
    process = BrokerProcess(tmp_path_factory.mktemp("connection-errors") / "data")
    add_scram_user("alice", "alice-secret")(process.data)
    port = free_port()
    process.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_SSL://127.0.0.1:{port}",
        **sasl_settings("SASL_SSL", certs),
    }
    process.start()
    yield Secured(process, port, certs)
    assert process.stop() == 0


def seglog(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> tuple[int, str, str, float]:
    """Run ``seglog ARGS``; its exit code, stdout, stderr and how long it took."""
    environment = {
        k: v for k, v in os.environ.items() if k not in ("SEGLOG_BOOTSTRAP_SERVERS",
                                                         "SEGLOG_CLIENT_CONFIG")
    }  # fmt: skip
    environment.update(env or {})
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "seglog", *args],
        input=stdin, capture_output=True, text=True, timeout=120, env=environment,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr, time.monotonic() - began


def fails_promptly(result: tuple[int, str, str, float], *parts: str) -> str:
    """The one error line of a failed run, checked to contain ``parts``."""
    code, out, err, took = result
    assert code == 1, (code, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, lines
    for part in parts:
        assert part in lines[0], lines[0]
    assert took < PROMPT, f"took {took:.1f} s: {lines[0]}"
    return lines[0]


def client_file(path: Path, **settings: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def sasl_ssl(certs: Certs, password: str, ca: Path | None = None) -> dict[str, str]:
    """Client properties as a Kafka user writes them for Kafka's tools (Java names)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="alice" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca or certs.ca),
    }


COMMANDS = [
    ["topics", "list"],
    ["topics", "describe", "t"],
    ["groups", "list"],
    ["acls", "list"],
    ["offsets", "t"],
    ["consume", "t", "-e"],
    ["produce", "t"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_connection_refused(command: list[str]) -> None:
    port = free_port()
    fails_promptly(
        seglog(*command, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", LONG, stdin="x\n"),
        f"seglog: error: cannot connect to 127.0.0.1:{port}: ",
        "Connection refused",
    )


@pytest.mark.parametrize(
    "command",
    [["transactions", "list"], ["configs", "--describe", "--entity-type", "topics"]],
    ids=" ".join,
)
def test_plain_connection_commands_connection_refused(command: list[str]) -> None:
    port = free_port()
    env = {"SEGLOG_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}"}
    code, _, err, took = seglog(*command, "--timeout", LONG, env=env)
    assert code == 1 and f"cannot reach 127.0.0.1:{port}" in err and "Connection refused" in err
    assert took < PROMPT


def test_tls_handshake_failed_names_why(secured: Secured, tmp_path: Path) -> None:
    properties = client_file(
        tmp_path / "client.properties",
        **sasl_ssl(secured.certs, "alice-secret", ca=secured.certs.other_ca),
    )
    line = fails_promptly(
        seglog("topics", "list", "--bootstrap-server", secured.tls, "--command-config",
               str(properties), "--timeout", LONG),
        f"cannot connect to {secured.tls}: SSL handshake failed",
        "certificate verify failed",
    )  # fmt: skip
    assert "(after " not in line  # librdkafka's timing is noise here


def test_sasl_authentication_failed(secured: Secured, tmp_path: Path) -> None:
    properties = client_file(tmp_path / "c.properties", **sasl_ssl(secured.certs, "wrong"))
    fails_promptly(
        seglog("consume", "t", "-e", "--command-config", str(properties), "--timeout", LONG,
               env={"SEGLOG_BOOTSTRAP_SERVERS": secured.tls}),
        f"cannot connect to {secured.tls}: SASL authentication error",
        "invalid credentials",
    )  # fmt: skip


def test_plaintext_spoken_to_a_tls_listener(secured: Secured) -> None:
    fails_promptly(
        seglog("topics", "list", "--bootstrap-server", secured.tls, "--timeout", LONG),
        f"cannot connect to {secured.tls}: the broker closed the connection at the first "
        "request: a TLS listener? (security.protocol=SSL or SASL_SSL",
    )


def test_tls_spoken_to_a_plaintext_listener(secured: Secured) -> None:
    fails_promptly(
        seglog("groups", "list", "--bootstrap-server", secured.plain, "-X",
               "security.protocol=SSL", "--timeout", LONG),
        f"cannot connect to {secured.plain}: SSL handshake failed",
        "PLAINTEXT broker listener?",
    )  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [["consume", "nowhere", "-e"], ["offsets", "nowhere"], ["topics", "describe", "nowhere"]],
)
def test_unknown_topic(secured: Secured, command: list[str]) -> None:
    fails_promptly(
        seglog(*command, "--bootstrap-server", secured.plain, "--timeout", LONG),
        "seglog: error: topic 'nowhere' does not exist",
    )


def test_a_broker_that_never_answers_ends_at_the_timeout() -> None:
    # A socket that listens but never reads: connections complete in the kernel.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        code, out, err, _ = seglog(
            "topics", "list", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2"
        )
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"seglog: error: cannot connect to 127.0.0.1:{port}: "
        "no answer within 2 s (--timeout to wait longer)"
    ]


def test_bootstrap_servers_from_the_environment(secured: Secured, topic: str) -> None:
    env = {"SEGLOG_BOOTSTRAP_SERVERS": secured.plain}
    code, _, err, _ = seglog("produce", topic, "--timeout", LONG, stdin="one\ntwo\n", env=env)
    assert code == 0, err
    code, out, err, _ = seglog(
        "consume", topic, "-e", "--from-beginning", "--timeout", LONG, env=env
    )
    assert code == 0, err
    assert out.splitlines() == ["one", "two"]
    # An explicit --bootstrap-server wins over the environment.
    dead = {"SEGLOG_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"}
    code, out, err, _ = seglog("topics", "list", "--bootstrap-server", secured.plain, env=dead)
    assert code == 0 and topic in out.splitlines(), err


def test_client_properties_file_from_the_environment(
    secured: Secured, tmp_path: Path, topic: str
) -> None:
    good = client_file(
        tmp_path / "good.properties",
        **{"bootstrap.servers": secured.tls, **sasl_ssl(secured.certs, "alice-secret")},
    )
    env = {"SEGLOG_CLIENT_CONFIG": str(good)}
    code, _, err, _ = seglog("topics", "create", topic, "--timeout", LONG, env=env)
    assert code == 0, err
    code, out, err, _ = seglog("topics", "list", "--timeout", LONG, env=env)
    assert code == 0 and topic in out.splitlines(), err
    # Options given on the command line win over the file: -X over its properties...
    bad = client_file(
        tmp_path / "bad.properties",
        **{"bootstrap.servers": secured.tls, **sasl_ssl(secured.certs, "wrong")},
    )
    code, out, err, _ = seglog(
        "topics", "list", "--command-config", str(bad), "-X", "sasl.password=alice-secret", env=env
    )
    assert code == 0 and topic in out.splitlines(), err
    # ... and --command-config over the environment's file.
    fails_promptly(
        seglog("topics", "list", "--command-config", str(bad), "--timeout", LONG, env=env),
        "SASL authentication error",
    )


def test_mirror_says_at_once_when_the_target_cannot_be_reached(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "data").mkdir()
    fails_promptly(
        seglog("mirror", "--to", f"127.0.0.1:{port}", "--log-dir", str(tmp_path / "data"),
               "--state", str(tmp_path / "m.json"), "--timeout", LONG),
        f"seglog: error: cannot connect to 127.0.0.1:{port}: ",
        "Connection refused",
    )  # fmt: skip


def test_one_dead_bootstrap_server_among_live_ones_is_no_failure(
    secured: Secured, topic: str
) -> None:
    # librdkafka tries the servers in random order: one refusal must not end the command.
    dead = f"127.0.0.1:{free_port()}"
    code, _, err, _ = seglog(
        "topics", "create", topic, "--bootstrap-server", f"{dead},{secured.plain}"
    )
    assert code == 0, err
    for _ in range(3):
        code, out, err, _ = seglog(
            "topics", "list", "--bootstrap-server", f"{dead},{secured.plain},{dead}"
        )
        assert code == 0 and topic in out.splitlines(), err


def test_a_java_only_client_setting_is_refused_naming_the_fix(tmp_path: Path) -> None:
    properties = client_file(
        tmp_path / "java.properties",
        **{"security.protocol": "SSL", "ssl.truststore.location": "/etc/kafka/trust.jks"},
    )
    code, _, err, _ = seglog("topics", "list", "--command-config", str(properties))
    assert code == 1
    assert err.splitlines() == [
        f"seglog: error: client properties file {properties}: Kafka option "
        "'ssl.truststore.type' JKS is not supported: a JKS trust store is a Java format. "
        "Convert it to PEM (keytool -exportcert -rfc) and set ssl.truststore.type=PEM with "
        "ssl.truststore.location, or set ssl.ca.location."
    ]
