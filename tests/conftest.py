"""Fixtures and collection rules shared by every test package."""

from __future__ import annotations

import gc
import os
import subprocess
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import ports

settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: Fixtures that start another process: a broker, a cluster of nodes, Spark's JVM.
PROCESS_FIXTURES = frozenset(
    {
        "broker",
        "make_broker",
        "make_cluster",
        "secured_broker",
        "acl_broker",
        "sasl_ssl_broker",
        "target",
        "source",
        "started",
        "spark",
    }
)

#: Classes of the tests that start a broker or nodes as a subprocess.
PROCESS_CLASSES = frozenset({"BrokerProcess", "Cluster"})


def _starts_a_process(item: pytest.Item) -> bool:
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    # A module that imports subprocess runs commands (seglog, kcat, openssl) itself;
    # one that imports the broker or cluster classes starts its own.
    module = getattr(item, "module", None)
    if module is None:
        return False
    return any(
        value is subprocess or getattr(value, "__name__", None) in PROCESS_CLASSES
        for value in vars(module).values()
    )


def _group(item: pytest.Item) -> str | None:
    """The worker group an item must share under ``pytest -n N --dist loadgroup``.

    Tests of one Spark session run in one worker (one JVM, not one per worker); tests
    that share a module-scoped fixture run in one worker, so that it is set up once.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    if "spark" in item.fixturenames:
        return "spark"
    for definitions in info.name2fixturedefs.values():
        if any(d.scope in ("module", "class", "package") for d in definitions):
            return item.nodeid.split("::", 1)[0]
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Open the run's claims on test ports before any worker process starts."""
    ports.open_claims()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the run's claims on test ports in the process that opened them."""
    if not hasattr(config, "workerinput"):
        ports.close_claims()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start processes; group those that must share a worker.

    Every test still runs in ``make test``; ``-m "not process"`` picks the quick ones.
    Tests that start processes come first: they are the long ones, so under pytest-xdist
    the short in-process ones fill the workers' time at the end instead of one worker
    finishing a long test alone.
    """
    starts: dict[str, bool] = {}
    for item in items:
        starts[item.nodeid] = _starts_a_process(item)
        if starts[item.nodeid]:
            item.add_marker(pytest.mark.process)
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: not starts[item.nodeid])


def _uses_kafka_python(module: object) -> bool:
    return any(
        str(getattr(value, "__module__", "") or "").split(".")[0] == "kafka"
        for value in vars(module).values()
    )


@pytest.fixture(autouse=True)
def collect_kafka_python_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    """Collect the sockets kafka-python leaves behind, at the end of the test that used it.

    kafka-python leaves the socket of a refused or broken connection unclosed, in a
    reference cycle: the garbage collector finds it later, during whichever test runs
    then, and pytest turns the ResourceWarning into that test's error.
    """
    yield
    module = getattr(request, "module", None)
    if module is not None and _uses_kafka_python(module):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
