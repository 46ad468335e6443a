from __future__ import annotations

import os
import shutil
import subprocess

import pytest

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
