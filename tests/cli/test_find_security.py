"""``seglog find`` through the HTTP API of a broker with SASL users, ACLs and TLS: the client's
``sasl.*`` properties become HTTP Basic credentials, its ``ssl.*`` ones the HTTPS trust."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import CliRunner, Result

from seglog.cli.main import cli
from tests.broker.http_api.test_security import ADMIN, _prepare, _start
from tests.broker.security.conftest import Certs, Secured, certs, secured_broker

__all__ = ["certs", "secured_broker"]  # fixtures


def find(topic: str, bootstrap: str, user: tuple[str, str], *args: str) -> Result:
    protocol = "SASL_SSL" if any("ssl.ca.location" in a for a in args) else "SASL_PLAINTEXT"
    settings = [
        f"security.protocol={protocol}",
        "sasl.mechanism=PLAIN",
        f"sasl.username={user[0]}",
        f"sasl.password={user[1]}",
    ]
    options = [o for setting in settings for o in ("-X", setting)]
    return CliRunner().invoke(
        cli, ["find", topic, "k", "--bootstrap-server", bootstrap, *options, *args]
    )


def error(result: Result) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("seglog: error: ") and result.stderr.count("\n") == 1
    return result.stderr


def test_sasl_users_and_acls(secured_broker: Callable[..., Secured], topic: str) -> None:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    _prepare(broker, topic)
    # The super user may ask for the broker's configs: the port is found.
    found = find(topic, broker.bootstrap, ADMIN)
    assert found.exit_code == 0, (found.output, found.exception)
    assert found.stdout.endswith("\tk\tsecret value\n")
    # Others may not describe the broker's configs: they give the API's address.
    refused = error(find(topic, broker.bootstrap, ("alice", "alice-secret")))
    assert "--console-url" in refused
    url = ["--console-url", f"http://127.0.0.1:{api.port}"]
    alice = find(topic, broker.bootstrap, ("alice", "alice-secret"), *url)
    assert alice.exit_code == 0 and alice.stdout.endswith("\tk\tsecret value\n")
    assert "not authorized" in error(find(topic, broker.bootstrap, ("bob", "bob-secret"), *url))
    wrong = error(find(topic, broker.bootstrap, ("alice", "wrong"), *url))
    assert "authentication required" in wrong


def test_https_over_sasl_ssl(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker, _ = _start(secured_broker, "SASL_SSL", certs)
    _prepare(broker, topic, certs)
    result = find(topic, broker.bootstrap, ADMIN, "-X", f"ssl.ca.location={certs.ca}")
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.endswith("\tk\tsecret value\n")
