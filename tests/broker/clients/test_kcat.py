from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest

from seglog.records import batch
from seglog.records.compression import Codec
from tests.broker.clients.payloads import CODECS
from tests.broker.conftest import BrokerProcess

KCAT = shutil.which("kcat")
# In CI the Makefile installs kcat; a missing kcat there is a failure, not a skip.
pytestmark = pytest.mark.skipif(
    KCAT is None and not os.environ.get("CI"), reason="kcat is not installed"
)


def kcat(*args: str, stdin: bytes | None = None) -> bytes:
    assert KCAT is not None, "kcat is not installed"
    result = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    lines = b"".join(b"key%d:value-%d-%s\n" % (i, i, codec.encode()) for i in range(20))
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-z", codec, "-H", "h1=v1", stdin=lines)
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%k|%s|%o|%h\n")
    assert out.splitlines() == [
        b"key%d|value-%d-%s|%d|h1=v1" % (i, i, codec.encode(), i) for i in range(20)
    ]


def test_metadata_listing(broker: BrokerProcess, topic: str) -> None:
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin=b"x\n")
    out = kcat("-b", broker.bootstrap, "-L", "-t", topic).decode()
    assert f'topic "{topic}" with 1 partitions' in out
    assert "leader 1" in out


@pytest.mark.parametrize("codec", [c for c in CODECS if c != "none"])
def test_kcat_batches_are_compressed_as_asked(
    broker: BrokerProcess, topic: str, codec: str
) -> None:
    # librdkafka 2.0.2 compresses only when the broker advertises the old API
    # versions it probes (the group APIs from v0 among them).
    # Compressible values: librdkafka sends a batch uncompressed when it would not shrink.
    lines = b"".join(b"value %d %s\n" % (i, b"x" * 300) for i in range(50))
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-z", codec, stdin=lines)
    segment = broker.data / f"{topic}-0" / "00000000000000000000.log"
    headers = [h for _, h in batch.iter_headers(segment.read_bytes())]
    assert headers and {h.magic for h in headers} == {2}
    assert {h.compression for h in headers} == {Codec[codec.upper()]}


def test_kcat_group_consumer_reads_and_commits(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**{"group.initial.rebalance.delay.ms": "0"})
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin=b"".join(b"m%d\n" % i for i in range(30)))
    out = kcat("-b", broker.bootstrap, "-G", "kcat-group", "-o", "beginning", "-e", "-q", topic)
    assert out.splitlines() == [b"m%d" % i for i in range(30)]
    # The committed offset is the log end: a second run of the group reads nothing new.
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin=b"late\n")
    again = kcat("-b", broker.bootstrap, "-G", "kcat-group", "-e", "-q", topic)
    assert again.splitlines() == [b"late"]
