"""AlterConfigs and IncrementalAlterConfigs on the BROKER resource (KIP-226) and GROUP (KIP-848).

The resource name is this broker's id (its own dynamic configs) or ``""``
(the cluster-wide default); the checks and messages are Kafka's
``ConfigAdminManager``'s. The legacy AlterConfigs replaces the whole level
with the configs given; IncrementalAlterConfigs applies SET, DELETE, APPEND
and SUBTRACT to what the level holds. Either way the whole resulting level is
checked (:meth:`~seglog.broker.dynamic_config.DynamicConfigs.validate`)
before anything is written, and a ``validate_only`` request writes nothing.

The change itself is blocking (an fsync'd file) and runs on the storage
threads through :func:`~seglog.broker.nodes.shared.change_shared`, which with
several nodes re-reads the file under the directory's admin lock first (so two
nodes changing it at once lose nothing) and has every other node re-read it.

A GROUP resource (a group's configs, :mod:`seglog.broker.group_config`) goes
the same way through its own file; its values are checked by Kafka's
``GroupConfig`` rules and refused with INVALID_CONFIG.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.blocking import run_blocking
from seglog.broker.dynamic_config import InvalidBrokerConfigError, definition_of
from seglog.broker.group_config import GROUP_CONFIGS
from seglog.broker.nodes.shared import change_shared
from seglog.broker.state import BrokerState
from seglog.config import ConfigDef, Type
from seglog.errors import InvalidConfigError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def check_resource_name(state: BrokerState, name: str) -> None:
    """Kafka's validateResourceNameIsCurrentNodeId (``""`` is the cluster-wide default)."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise InvalidBrokerConfigError(f"Node id must be an integer, but it is: {name}") from None
    if node != state.settings.node_id:
        raise InvalidBrokerConfigError(
            f"Unexpected broker id, expected {state.settings.node_id}, but received {name}"
        )


def _check_request(configs: list[dict[str, Any]], null_allowed: Callable[[int], bool]) -> None:
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise InvalidBrokerConfigError("Error due to duplicate config keys")
    nulls = [
        c["name"]
        for c in configs
        if c["value"] is None and not null_allowed(c.get("config_operation", SET))
    ]
    if nulls:
        raise InvalidBrokerConfigError("Null value not supported for : " + ", ".join(nulls))


def _items(props: dict[str, str], name: str) -> list[str]:
    """The items of list config ``name``: the level's value, else the table's default."""
    value = props.get(name)
    if value is None:
        definition = definition_of(name)
        value = None if definition is None else definition.to_string(definition.default)
    return [item for item in (value or "").split(",") if item]


def apply_operations(
    props: dict[str, str],
    configs: list[dict[str, Any]],
    lookup: Callable[[str], ConfigDef | None] = definition_of,
) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on a level's configs (prepareIncrementalConfigs)."""
    result = dict(props)
    for config in configs:
        name, operation, value = config["name"], config["config_operation"], config["value"]
        if operation == SET:
            result[name] = value
        elif operation == DELETE:
            result.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            definition = lookup(name)
            if definition is None:
                raise InvalidConfigError(f"Unknown config name: {name}")
            verb = "append" if operation == APPEND else "subtract"
            if definition.type is not Type.LIST:
                raise InvalidConfigError(
                    f"Config value {verb} is not allowed for config key: {name}"
                )
            items = _items(result, name)
            given = (value or "").split(",")
            if operation == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            result[name] = ",".join(items)
        else:
            raise InvalidBrokerConfigError(f"Unknown operations type {operation}")
    return result


async def _change(
    state: BrokerState,
    name: str,
    compute: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
) -> None:
    dynamic = state.dynamic

    def validate() -> dict[str, str]:
        props = compute(dynamic.level(name))
        dynamic.validate(name, props, state.settings)
        return props

    def change() -> None:
        dynamic.replace(name, validate())

    if validate_only:
        await run_blocking(state.log_dir.env, validate)
    else:
        await run_blocking(state.log_dir.env, change_shared, state, dynamic.reload, change)


async def alter_broker(
    state: BrokerState, name: str, configs: list[dict[str, Any]], validate_only: bool
) -> None:
    """Legacy AlterConfigs: the configs given become the level's whole set."""
    check_resource_name(state, name)
    _check_request(configs, lambda _: False)
    given = {c["name"]: c["value"] for c in configs}
    await _change(state, name, lambda _: dict(given), validate_only)


async def incremental_alter_broker(
    state: BrokerState, name: str, configs: list[dict[str, Any]], validate_only: bool
) -> None:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on the level's configs."""
    check_resource_name(state, name)
    _check_request(configs, lambda operation: operation == DELETE)
    await _change(state, name, lambda props: apply_operations(props, configs), validate_only)


async def _change_group(
    state: BrokerState,
    group: str,
    compute: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
) -> None:
    configs = state.group_configs

    def validate() -> dict[str, str]:
        props = compute(configs.of(group))
        configs.check(props)
        return props

    def change() -> None:
        configs.replace(group, validate())

    if validate_only:
        await run_blocking(state.log_dir.env, validate)
    else:
        await run_blocking(state.log_dir.env, change_shared, state, configs.reload, change)


def _check_group_name(name: str) -> None:
    if not name:
        raise InvalidBrokerConfigError("Group name must not be empty")


async def alter_group(
    state: BrokerState, name: str, configs: list[dict[str, Any]], validate_only: bool
) -> None:
    """Legacy AlterConfigs on a group: the configs given become the group's whole set."""
    _check_group_name(name)
    _check_request(configs, lambda _: False)
    given = {c["name"]: c["value"] for c in configs}
    await _change_group(state, name, lambda _: dict(given), validate_only)


async def incremental_alter_group(
    state: BrokerState, name: str, configs: list[dict[str, Any]], validate_only: bool
) -> None:
    """IncrementalAlterConfigs on a group: SET and DELETE (no group config is a list)."""
    _check_group_name(name)
    _check_request(configs, lambda operation: operation == DELETE)
    await _change_group(
        state,
        name,
        lambda props: apply_operations(props, configs, GROUP_CONFIGS.get),
        validate_only,
    )
