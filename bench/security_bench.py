"""What security costs: produce and consume over SASL_SSL beside PLAINTEXT, and per connection.

    .venv/bin/python bench/security_bench.py            # ~1 minute
    .venv/bin/python bench/security_bench.py --quick    # smoke run

One broker (``python -m seglog serve`` as a subprocess) with two listeners:
PLAINTEXT and SASL_SSL (TLS from a certificate made here with ``openssl``,
SCRAM-SHA-512 with a user made with ``seglog users add``). Rows:

  produce     N values of 1 KiB to one partition, acks=1, linger.ms=5,
              batch.size=1 MiB, from confluent-kafka; MB/s of value bytes.
  consume     the same topic read back with assign() from offset 0.
  connection  a new connection until its first answer, in this process on
              blocking sockets: PLAINTEXT is connect + ApiVersions; SASL_SSL is
              connect + TLS handshake + ApiVersions + SaslHandshake + two
              SaslAuthenticate round trips of SCRAM (4096 iterations, the
              client's PBKDF2 included). Mean of K connections.

The goal: TLS costs at most 30% of plaintext throughput with
1 KiB records, i.e. SASL_SSL/PLAINTEXT >= 70%.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
VALUE = bytes(i * 7 % 251 for i in range(1024))
PASSWORD = "bench-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_certs(directory: Path) -> tuple[Path, Path]:
    """(server key+chain PEM, CA PEM)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=bench-ca")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
            "-out", "server.csr", "-subj", "/CN=localhost")  # fmt: skip
    (directory / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-out", "server.pem", "-extfile", "ext")  # fmt: skip
    bundle = directory / "bundle.pem"
    bundle.write_text(
        (directory / "server.key").read_text() + (directory / "server.pem").read_text()
    )
    return bundle, directory / "ca.pem"


def start_broker(root: Path, bundle: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    data = root / "data"
    subprocess.run(
        [sys.executable, "-m", "seglog", "users", "add", "bench", "--log-dir", str(data),
         "--create", "--password", PASSWORD, "--mechanism", "SCRAM-SHA-512"],
        check=True, capture_output=True,
    )  # fmt: skip
    plain, secure = free_port(), free_port()
    overrides = {
        "log.dirs": str(data),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(bundle),
    }
    args = [sys.executable, "-m", "seglog", "serve"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    log = open(root / "broker.log", "wb")  # noqa: SIM115 (kept open for the process)
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", secure), timeout=0.2):
                return process, plain, secure
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the broker did not start")


def client_config(port: int, ca: Path | None) -> dict[str, Any]:
    if ca is None:
        return {"bootstrap.servers": f"127.0.0.1:{port}"}
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca),
    }


def produce(config: dict[str, Any], topic: str, count: int) -> float:
    producer = Producer(
        {**config, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
         "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False}
    )  # fmt: skip
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise RuntimeError("messages not delivered")
    return count * len(VALUE) / (time.perf_counter() - start) / 1e6


def consume(config: dict[str, Any], topic: str, count: int) -> float:
    consumer = Consumer(
        {**config, "group.id": "bench", "enable.auto.commit": False,
         "queued.max.messages.kbytes": 256 * 1024, "fetch.queue.backoff.ms": 10}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, start = 0, 0.0
    try:
        while got < count:
            batch = consumer.consume(10_000, 10)
            if not batch:
                raise RuntimeError(f"consumed {got} of {count}")
            if not start:
                start = time.perf_counter()
                first = len(batch)
            got += len(batch)
    finally:
        consumer.close()
    return (got - first) * len(VALUE) / (time.perf_counter() - start) / 1e6


# --------------------------------------------------------------- connection cost


def _request(sock: socket.socket | ssl.SSLSocket, api: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api, version, 1, 5) + b"bench"
    if api == 36 and version >= 2:
        header += b"\0"  # flexible header: no tagged fields
    message = header + body
    sock.sendall(struct.pack(">i", len(message)) + message)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)


def _read(sock: socket.socket | ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _auth_bytes(response: bytes) -> bytes:
    # SaslAuthenticate v1: correlation id, error code, error message (nullable), bytes.
    pos = 4
    error = struct.unpack_from(">h", response, pos)[0]
    pos += 2
    length = struct.unpack_from(">h", response, pos)[0]
    pos += 2 + max(length, 0)
    if error:
        raise RuntimeError(f"authentication failed ({error})")
    size = struct.unpack_from(">i", response, pos)[0]
    return response[pos + 4 : pos + 4 + size]


def scram_login(sock: ssl.SSLSocket) -> None:
    """SaslHandshake v1 and SCRAM-SHA-512 by SaslAuthenticate v1 (RFC 5802, client side)."""
    mechanism = b"SCRAM-SHA-512"
    _request(sock, 17, 1, struct.pack(">h", len(mechanism)) + mechanism)
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n=bench,r={nonce}"
    server_first = _auth_bytes(_request(sock, 36, 1, _bytes(b"n,," + first_bare.encode())))
    attributes = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", PASSWORD.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = f"c=biws,r={attributes['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha512")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    final = _auth_bytes(_request(sock, 36, 1, _bytes(f"{without_proof},p=".encode() + proof)))
    server_key = hmac.digest(salted, b"Server Key", "sha512")
    expected = b"v=" + base64.b64encode(hmac.digest(server_key, auth_message, "sha512"))
    if final != expected:
        raise RuntimeError("the server's signature does not match")


def connection_cost(port: int, ca: Path | None, count: int) -> float:
    """Mean seconds from connect to the first answer (after authentication under SASL_SSL)."""
    context = None if ca is None else ssl.create_default_context(cafile=str(ca))
    start = time.perf_counter()
    for _ in range(count):
        raw = socket.create_connection(("127.0.0.1", port))
        sock: socket.socket | ssl.SSLSocket = raw
        if context is not None:
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        _request(sock, 18, 0, b"")
        if isinstance(sock, ssl.SSLSocket):
            scram_login(sock)
        sock.close()
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    args = parser.parse_args()
    count = 20_000 if args.quick else 200_000
    connections = 10 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="seglog-security-bench-") as directory:
        root = Path(directory)
        (root / "certs").mkdir()
        bundle, ca = make_certs(root / "certs")
        process, plain, secure = start_broker(root, bundle)
        try:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
            for future in admin.create_topics(
                [NewTopic("plain", 1, 1), NewTopic("secure", 1, 1)]
            ).values():
                future.result(30)
            rows = []
            for label, port, cafile, topic in (
                ("PLAINTEXT", plain, None, "plain"),
                ("SASL_SSL", secure, ca, "secure"),
            ):
                config = client_config(port, cafile)
                rows.append(
                    (
                        label,
                        produce(config, topic, count),
                        consume(config, topic, count),
                        connection_cost(port, cafile, connections) * 1000,
                    )
                )
        finally:
            process.terminate()
            process.wait(30)
    print(f"{count:,} values of 1 KiB, acks=1; {connections} connections")
    print(f"{'listener':<10} {'produce MB/s':>13} {'consume MB/s':>13} {'ms/connection':>14}")
    for label, produced, consumed, per_connection in rows:
        print(f"{label:<10} {produced:>13.1f} {consumed:>13.1f} {per_connection:>14.2f}")
    (_, p0, c0, _), (_, p1, c1, _) = rows
    print(f"SASL_SSL / PLAINTEXT: produce {p1 / p0:.0%}, consume {c1 / c0:.0%} (goal >= 70%)")


if __name__ == "__main__":
    main()
