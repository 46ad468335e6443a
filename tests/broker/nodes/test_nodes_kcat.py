"""``seglog serve --nodes N`` against kcat: metadata from each node, produce and consume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.broker.nodes.conftest import Cluster
from tests.broker.nodes.test_nodes_confluent import create

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


def test_kcat_against_three_nodes(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3, **{"group.initial.rebalance.delay.ms": "0"})
    create(cluster, 3, "kc", 6)

    # kcat -L against each node names every node and the same leaders.
    listings = []
    for node in (1, 2, 3):
        listing = json.loads(kcat("-b", cluster.bootstrap(node), "-L", "-J", "-t", "kc"))
        assert listing["originating_broker"]["id"] == node
        assert listing["controllerid"] == 1
        assert {b["id"]: b["name"] for b in listing["brokers"]} == {
            n: cluster.bootstrap(n) for n in (1, 2, 3)
        }
        (topic,) = listing["topics"]
        assert topic["topic"] == "kc"
        listings.append({p["partition"]: (p["leader"], p["replicas"]) for p in topic["partitions"]})
    assert listings[0] == listings[1] == listings[2]
    led = {p: leader for p, (leader, _) in listings[0].items()}
    assert sorted(led.values()) == [1, 1, 2, 2, 3, 3]
    assert all(replicas == [{"id": led[p]}] for p, (_, replicas) in listings[0].items())

    # Produce to and consume from a partition the second node leads, bootstrapping
    # from the others: kcat goes to node 2 for both.
    partition = min(p for p, node in led.items() if node == 2)
    lines = b"".join(b"key%d:value-%d\n" % (i, i) for i in range(50))
    kcat("-b", cluster.bootstrap(1), "-P", "-t", "kc", "-p", str(partition), "-K:", stdin=lines)
    out = kcat(
        "-b", cluster.bootstrap(3), "-C", "-t", "kc", "-p", str(partition), "-e", "-f", "%k|%s|%o\n"
    )
    assert out.splitlines() == [b"key%d|value-%d|%d" % (i, i, i) for i in range(50)]
    assert (cluster.data / f"kc-{partition}" / "00000000000000000000.log").stat().st_size > 0

    # Records spread over every partition, read back by a kcat group through node 3.
    kcat(
        "-b",
        cluster.bootstrap(2),
        "-P",
        "-t",
        "kc",
        stdin=b"".join(b"m%d\n" % i for i in range(60)),
    )
    grouped = kcat(
        "-b",
        cluster.bootstrap(3),
        "-G",
        "kc-group",
        "-o",
        "beginning",
        "-e",
        "-q",
        "-f",
        "%p|%s\n",
        "kc",
    )
    by_partition: dict[int, list[bytes]] = {}
    for line in grouped.splitlines():
        p, value = line.split(b"|", 1)
        by_partition.setdefault(int(p), []).append(value)
    assert sorted(v for values in by_partition.values() for v in values) == sorted(
        [b"m%d" % i for i in range(60)] + [b"value-%d" % i for i in range(50)]
    )
    assert by_partition[partition][:50] == [b"value-%d" % i for i in range(50)]
    assert cluster.stop() == 0
