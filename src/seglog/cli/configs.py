"""``seglog configs``: describe and change topic, broker, user and client configs,
like ``kafka-configs.sh``.

- ``topics``, ``brokers``, ``groups``: DescribeConfigs and
  IncrementalAlterConfigs (SET for ``--add-config``, DELETE for
  ``--delete-config``); ``--entity-default`` on brokers is the cluster-wide
  default (KIP-226); a group's configs are KIP-848's.
- ``users``, ``clients``: client quotas (DescribeClientQuotas,
  AlterClientQuotas); for users also SCRAM credentials
  (``SCRAM-SHA-256=[iterations=8192,password=secret]``), salted here.

librdkafka cannot name the cluster-wide default broker resource nor client
quotas, so the command speaks the requests itself
(:func:`~seglog.cli._raw_client.kafka_request`, secured as the client
properties say), encoded by :mod:`seglog.protocol`. The output is
kafka-configs.sh's.
"""

from __future__ import annotations

import os
from typing import Any

import click

from seglog.broker.security.scram import MECHANISMS, MIN_ITERATIONS, salted_password
from seglog.cli._client import ClientError, ClientSettings, client_options
from seglog.cli._raw_client import kafka_request
from seglog.protocol import ApiKey, error_codes

_TOPIC, _BROKER, _GROUP = 2, 4, 32
_KINDS = {"topics": _TOPIC, "brokers": _BROKER, "groups": _GROUP}
# The source of a value set on the resource itself, by resource type.
_OWN_SOURCE = {_TOPIC: 1, _BROKER: 2, _GROUP: 8}
_SET, _DELETE = 0, 1
_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
_QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
# Kafka's ScramMechanism ids on the wire.
_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_MECHANISM_NAMES = {v: k for k, v in _MECHANISM_IDS.items()}


def parse_configs(text: str) -> dict[str, str]:
    """``--add-config`` as kafka-configs.sh reads it: ``k=v,k2=[a,b]`` (brackets hold commas)."""
    pairs: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            pairs.append(current)
            current = ""
        else:
            current += char
    pairs.append(current)
    configs: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in pairs)):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


def _fail(code: int, message: str | None, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {message or error_codes.name_for(code)}")


def _describe(client: ClientSettings, kind: int, name: str) -> list[dict[str, Any]]:
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    result = kafka_request(client, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]
    _fail(result["error_code"], result["error_message"], f"cannot describe {name or 'default'}")
    return sorted(result["configs"], key=lambda c: c["name"])


def _print_configs(configs: list[dict[str, Any]], source: int | None) -> None:
    for entry in configs:
        if source is not None and entry["config_source"] != source:
            continue
        synonyms = ", ".join(
            f"{_SOURCES.get(s['source'], 'UNKNOWN')}:{s['name']}={_text(s['value'])}"
            for s in entry["synonyms"]
        )
        click.echo(
            f"  {entry['name']}={_text(entry['value'])} "
            f"sensitive={'true' if entry['is_sensitive'] else 'false'} synonyms={{{synonyms}}}"
        )


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _resource_names(
    entity_type: str, name: str | None, default: bool, client: ClientSettings
) -> list[str]:
    """The resources to describe: the one named, the default, or every one (topics, brokers)."""
    if default:
        return [""]
    if name is not None:
        return [name]
    body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    metadata = kafka_request(client, ApiKey.METADATA, 8, body)
    if entity_type == "topics":
        return sorted(t["name"] for t in metadata["topics"])
    # Every broker, then the cluster-wide default, as kafka-configs.sh lists them.
    brokers = sorted(metadata["brokers"], key=lambda b: b["node_id"])
    return [str(b["node_id"]) for b in brokers] + [""]


def _describe_resources(
    entity_type: str,
    name: str | None,
    default: bool,
    describe_all: bool,
    client: ClientSettings,
) -> None:
    kind = _KINDS[entity_type]
    for resource in _resource_names(entity_type, name, default, client):
        configs = _describe(client, kind, resource)
        if kind == _BROKER and resource == "":
            click.echo("Default configs for brokers in the cluster are:")
            source: int | None = 3
        else:
            click.echo(
                f"{'All' if describe_all else 'Dynamic'} configs for "
                f"{entity_type[:-1]} {resource} are:"
            )
            source = _OWN_SOURCE[kind]
        _print_configs(configs, None if describe_all else source)


def _alter_resource(
    entity_type: str,
    name: str,
    added: dict[str, str],
    deleted: list[str],
    client: ClientSettings,
) -> None:
    kind = _KINDS[entity_type]
    # As kafka-configs.sh: deleting a config that is not set is a mistake worth saying.
    source = 3 if kind == _BROKER and name == "" else _OWN_SOURCE[kind]
    current = {c["name"] for c in _describe(client, kind, name) if c["config_source"] == source}
    missing = [key for key in deleted if key not in current]
    if missing:
        raise ClientError(f"Invalid config(s): {','.join(missing)}")
    configs = [{"name": k, "config_operation": _SET, "value": v} for k, v in added.items()]
    configs += [{"name": k, "config_operation": _DELETE, "value": None} for k in deleted]
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configs": configs}],
        "validate_only": False,
    }
    answer = kafka_request(client, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    response = answer["responses"][0]
    _fail(response["error_code"], response["error_message"], "cannot alter configs")
    if kind == _BROKER and name == "":
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        click.echo(f"Completed updating config for {entity_type[:-1]} {name}.")


def _quota_entity(entity_type: str, name: str | None) -> list[dict[str, Any]]:
    return [{"entity_type": "user" if entity_type == "users" else "client-id", "entity_name": name}]


def _describe_quotas(entity_type: str, name: str | None, client: ClientSettings) -> None:
    kind = "user" if entity_type == "users" else "client-id"
    match = {"entity_type": kind, "match_type": 0, "match": name}
    if name is None:
        match = {"entity_type": kind, "match_type": 1, "match": None}
    answer = kafka_request(
        client,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        1,
        {"components": [match], "strict": True},
    )
    _fail(answer["error_code"], answer["error_message"], "cannot describe quotas")
    label = "user-principal" if entity_type == "users" else "client-id"
    for entry in answer["entries"] or []:
        entity = entry["entity"][0]["entity_name"]
        who = f"{label} '{entity}'" if entity is not None else f"the default {label}"
        values = ", ".join(f"{v['key']}={v['value']}" for v in entry["values"])
        click.echo(f"Quota configs for {who} are {values}")
    if entity_type == "users" and name is not None:
        body = {"users": [{"name": name}]}
        scram = kafka_request(client, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
        for result in scram["results"]:
            if result["error_code"]:
                continue  # no credentials: nothing to say, as kafka-configs.sh
            infos = ", ".join(
                f"{_MECHANISM_NAMES.get(i['mechanism'], '?')}=iterations={i['iterations']}"
                for i in result["credential_infos"]
            )
            click.echo(
                f"SCRAM credential configs for user-principal '{result['user']}' are {infos}"
            )


def _scram_upsertion(user: str, mechanism: str, value: str) -> dict[str, Any]:
    settings = dict(part.partition("=")[::2] for part in value.split(",") if part)
    if "password" not in settings:
        raise ClientError(f"{mechanism}: expected [iterations=N,password=SECRET]")
    try:
        iterations = int(settings.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise ClientError(f"{mechanism}: iterations must be a number") from None
    salt = os.urandom(32)
    return {
        "name": user,
        "mechanism": _MECHANISM_IDS[mechanism],
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mechanism, settings["password"], salt, iterations),
    }


def _alter_quotas_and_credentials(
    entity_type: str,
    name: str | None,
    added: dict[str, str],
    deleted: list[str],
    client: ClientSettings,
) -> None:
    scram_added = {k: v for k, v in added.items() if k in MECHANISMS}
    scram_deleted = [k for k in deleted if k in MECHANISMS]
    unknown = [k for k in [*added, *deleted] if k not in _QUOTA_KEYS and k not in MECHANISMS]
    if unknown or ((scram_added or scram_deleted) and (entity_type != "users" or name is None)):
        raise ClientError(
            f"Invalid config(s): {','.join(unknown or [*scram_added, *scram_deleted])}"
        )
    try:
        ops = [
            {"key": k, "value": float(v), "remove": False}
            for k, v in added.items()
            if k in _QUOTA_KEYS
        ]
    except ValueError as exc:
        raise ClientError(f"a quota must be a number: {exc}") from None
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted if k in _QUOTA_KEYS]
    if ops:
        body = {
            "entries": [{"entity": _quota_entity(entity_type, name), "ops": ops}],
            "validate_only": False,
        }
        answer = kafka_request(client, ApiKey.ALTER_CLIENT_QUOTAS, 1, body)
        entry = answer["entries"][0]
        _fail(entry["error_code"], entry["error_message"], "cannot alter quotas")
    if scram_added or scram_deleted:
        assert name is not None
        body = {
            "deletions": [{"name": name, "mechanism": _MECHANISM_IDS[m]} for m in scram_deleted],
            "upsertions": [_scram_upsertion(name, m, v) for m, v in scram_added.items()],
        }
        answer = kafka_request(client, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
        for result in answer["results"]:
            _fail(result["error_code"], result["error_message"], "cannot alter credentials")
    who = (
        f"{entity_type[:-1]}-principal '{name}'"
        if entity_type == "users"
        else f"client-id '{name}'"
    )
    if name is None:
        who = f"the default {'user-principal' if entity_type == 'users' else 'client-id'}"
    click.echo(f"Completed updating config for {who}.")


@click.command("configs")
@click.option("--describe", "action", flag_value="describe", help="List configs for the entity.")
@click.option("--alter", "action", flag_value="alter", help="Change configs of the entity.")
@click.option(
    "--entity-type",
    type=click.Choice(["topics", "brokers", "groups", "users", "clients"]),
    required=True,
    help="The kind of entity.",
)
@click.option("--entity-name", metavar="NAME", help="The entity (a topic, a broker id, ...).")
@click.option(
    "--entity-default",
    is_flag=True,
    help="The default of the type (brokers: the cluster-wide default).",
)
@click.option(
    "--add-config",
    metavar="K=V,K2=[A,B]",
    help="Configs to set; brackets hold a list value's commas.",
)
@click.option(
    "--delete-config",
    "delete_configs",
    metavar="K",
    multiple=True,
    help="Configs to remove, comma separated (repeatable).",
)
@click.option(
    "--all", "describe_all", is_flag=True, help="Describe every config, not only dynamic ones."
)
@client_options
def configs(
    action: str | None,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add_config: str | None,
    delete_configs: tuple[str, ...],
    describe_all: bool,
    client: ClientSettings,
) -> None:
    """Describe or change configs of topics, brokers, groups, users and clients (kafka-configs)."""
    if action is None:
        raise click.UsageError("one of --describe or --alter is required")
    if entity_name is not None and entity_default:
        raise click.UsageError("--entity-name and --entity-default cannot be used together")
    if entity_type in ("topics", "groups") and entity_default:
        raise click.UsageError(f"--entity-default is not allowed for {entity_type}")
    if entity_type == "groups" and entity_name is None:
        raise click.UsageError("--entity-type groups needs --entity-name")
    if entity_type == "brokers" and entity_name is not None:
        try:
            int(entity_name)
        except ValueError:
            raise click.UsageError(
                f"The entity name for brokers must be a valid integer broker id, "
                f"found: {entity_name}"
            ) from None
    added = parse_configs(add_config or "")
    deleted = [k.strip() for item in delete_configs for k in item.split(",") if k.strip()]
    if action == "describe":
        if added or deleted:
            raise click.UsageError("--add-config and --delete-config are only for --alter")
        if entity_type in ("users", "clients"):
            _describe_quotas(entity_type, entity_name, client)
        else:
            _describe_resources(entity_type, entity_name, entity_default, describe_all, client)
        return
    if entity_name is None and not entity_default:
        raise click.UsageError("--alter needs --entity-name or --entity-default")
    if not added and not deleted:
        raise click.UsageError("--alter needs --add-config or --delete-config")
    if entity_type in ("users", "clients"):
        _alter_quotas_and_credentials(entity_type, entity_name, added, deleted, client)
    else:
        _alter_resource(entity_type, entity_name or "", added, deleted, client)
