"""The client quota engine: Kafka's sampled rate, throttle time and entity precedence."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    SAMPLES,
    USER,
    WINDOW_MS,
    ClientQuotas,
    Rate,
    make_entity,
)


def test_a_first_burst_is_measured_over_ten_windows() -> None:
    """Kafka counts at least SAMPLES - 1 whole windows, so one burst is not a huge rate."""
    rate = Rate()
    rate.record(10_000, 1_000_000)
    assert rate.window_ms(1_000_000) == (SAMPLES - 1) * WINDOW_MS
    assert rate.value(1_000_000) == 1_000.0


def test_old_windows_are_forgotten() -> None:
    rate = Rate()
    rate.record(10_000, 0)
    later = (SAMPLES + 1) * WINDOW_MS
    rate.record(1, later)
    assert rate.value(later) == 1 / ((SAMPLES - 1) * WINDOW_MS / 1000)


@given(st.integers(1, 10**9), st.integers(1, 10**6))
def test_the_throttle_brings_the_rate_back_to_the_quota(size: int, quota: int) -> None:
    """(rate - quota) / quota x window: waiting that long, the rate is the quota."""
    quotas = ClientQuotas(None, {make_entity([(CLIENT_ID, "c")]): {PRODUCER_BYTE_RATE: quota}})
    throttle = quotas.record(PRODUCER_BYTE_RATE, "u", "c", size, 0)
    window_s = (SAMPLES - 1) * WINDOW_MS / 1000
    observed = size / window_s
    if observed <= quota:
        assert throttle == 0
    else:
        assert abs(size / (window_s + throttle / 1000) - quota) <= quota * 0.01 + 1


def test_the_request_quota_throttles_at_most_one_window() -> None:
    quotas = ClientQuotas(None, {make_entity([(USER, None)]): {REQUEST_PERCENTAGE: 0.01}})
    assert quotas.record(REQUEST_PERCENTAGE, "u", "c", 50.0, 0) == WINDOW_MS


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    settings = {
        make_entity([(CLIENT_ID, None)]): {PRODUCER_BYTE_RATE: 1.0},
        make_entity([(USER, None)]): {PRODUCER_BYTE_RATE: 2.0},
        make_entity([(USER, "u"), (CLIENT_ID, None)]): {PRODUCER_BYTE_RATE: 3.0},
        make_entity([(USER, "u")]): {PRODUCER_BYTE_RATE: 4.0},
    }
    quotas = ClientQuotas(None, settings)
    # /users/<user>/clients/<default> comes before /users/<user>, which comes before the
    # default user and the client ids.
    assert quotas._resolve(PRODUCER_BYTE_RATE, "u", "c") == (
        3.0,
        make_entity([(USER, "u"), (CLIENT_ID, "c")]),
    )
    # Another user: /users/<default> (charged to that user alone).
    assert quotas._resolve(PRODUCER_BYTE_RATE, "v", "c") == (2.0, make_entity([(USER, "v")]))
    del settings[make_entity([(USER, None)])]
    quotas = ClientQuotas(None, settings)
    assert quotas._resolve(PRODUCER_BYTE_RATE, "v", "c") == (
        1.0,
        make_entity([(CLIENT_ID, "c")]),
    )


def test_settings_are_saved_and_loaded(tmp_path: Path) -> None:
    quotas = ClientQuotas.load(tmp_path)
    assert not quotas.active
    entity = make_entity([(USER, "u"), (CLIENT_ID, None)])
    quotas.alter({entity: {PRODUCER_BYTE_RATE: 100.0, REQUEST_PERCENTAGE: 50.0}})
    quotas.alter({entity: {REQUEST_PERCENTAGE: None}})
    assert ClientQuotas.load(tmp_path).entries() == {entity: {PRODUCER_BYTE_RATE: 100.0}}
    quotas.alter({entity: {PRODUCER_BYTE_RATE: None}})
    assert ClientQuotas.load(tmp_path).entries() == {}
