"""The real broker of tests/broker for the examples' tests."""

from tests.broker.conftest import make_broker

__all__ = ["make_broker"]
