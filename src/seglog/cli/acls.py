"""``seglog acls``: add, list and remove ACLs on a broker, like kafka-acls.sh.

Each subcommand is one CreateAcls, DescribeAcls or DeleteAcls request through
confluent-kafka's ``AdminClient`` (``-X`` passes the SASL and TLS settings).
Resources are named as in kafka-acls: ``--topic``, ``--group``, ``--cluster``,
``--transactional-id``, with ``--resource-pattern-type literal|prefixed``.
"""

from __future__ import annotations

from typing import Any

import click

# confluent-kafka re-exports these without ``as``, which mypy's strict mode does not
# count as an export; they are its documented public names all the same.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    admin_client,
    client_options,
    error_text,
)

_ANY_HOST: Any = None  # a filter's None matches every host

_OPERATIONS = [
    "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
    "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CLUSTER_ACTION",
]  # fmt: skip


def _resource_options(func: Any) -> Any:
    options = [
        click.option("--topic", help="A topic (or prefix, or *)."),
        click.option("--group", help="A consumer group (or prefix, or *)."),
        click.option("--cluster", is_flag=True, help="The cluster."),
        click.option("--transactional-id", help="A transactional id (or prefix, or *)."),
        click.option(
            "--resource-pattern-type",
            type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
            default=None,
            help="How the name matches [default: literal to add, any to list and remove].",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _resource(
    topic: str | None, group: str | None, cluster: bool, transactional_id: str | None
) -> tuple[ResourceType, str | None]:
    chosen = [
        (ResourceType.TOPIC, topic),
        (ResourceType.GROUP, group),
        (ResourceType.BROKER, "kafka-cluster" if cluster else None),
        (ResourceType.TRANSACTIONAL_ID, transactional_id),
    ]
    given = [(kind, name) for kind, name in chosen if name is not None]
    if len(given) > 1:
        raise click.UsageError("give one of --topic, --group, --cluster, --transactional-id")
    return given[0] if given else (ResourceType.ANY, None)


def _admin(client: ClientSettings) -> AdminClient:
    return admin_client(client)


def _name(value: object) -> str:
    return str(getattr(value, "name", value))


def _show(binding: AclBinding) -> str:
    return (
        f"{_name(binding.restype)}:{_name(binding.resource_pattern_type)}:{binding.name} "
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={_name(binding.operation)}, "
        f"permissionType={_name(binding.permission_type)})"
    )


@click.group("acls")
def acls() -> None:
    """Add, list and remove ACLs on a broker (like kafka-acls.sh)."""


@acls.command("add")
@_resource_options
@click.option("--allow-principal", "allow", multiple=True, help="User:NAME to allow.")
@click.option("--deny-principal", "deny", multiple=True, help="User:NAME to deny.")
@click.option(
    "--operation",
    "operations",
    type=click.Choice(_OPERATIONS, case_sensitive=False),
    multiple=True,
    required=True,
    help="Operation (repeatable).",
)
@click.option("--host", default="*", show_default=True, help="Client address the ACL is for.")
@client_options
def add(
    client: ClientSettings,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_pattern_type: str | None,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    operations: tuple[str, ...],
    host: str,
) -> None:
    """Add ACLs: each principal given, each operation, on one resource."""
    kind, name = _resource(topic, group, cluster, transactional_id)
    if name is None:
        raise click.UsageError("give a resource: --topic, --group, --cluster or --transactional-id")
    if not allow and not deny:
        raise click.UsageError("give --allow-principal or --deny-principal")
    pattern = ResourcePatternType[(resource_pattern_type or "literal").upper()]
    bindings = [
        AclBinding(kind, name, pattern, principal, host, AclOperation[op.upper()], permission)
        for permission, principals in (
            (AclPermissionType.ALLOW, allow),
            (AclPermissionType.DENY, deny),
        )
        for principal in principals
        for op in operations
    ]
    admin = _admin(client)  # kept: the requests end if the client is collected
    for binding, future in admin.create_acls(bindings).items():
        try:
            future.result(client.timeout + 1)
        except Exception as exc:
            raise ClientError(f"{_show(binding)}: {error_text(exc)}") from None
        click.echo(f"added {_show(binding)}")


def _filter(
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_pattern_type: str | None,
    principal: str | None,
    operation: str | None,
) -> AclBindingFilter:
    kind, name = _resource(topic, group, cluster, transactional_id)
    # None matches anything in a filter (the stubs say str).
    any_name: Any = name
    any_principal: Any = principal
    return AclBindingFilter(
        kind,
        any_name,
        ResourcePatternType[(resource_pattern_type or "any").upper()],
        any_principal,
        _ANY_HOST,
        AclOperation[(operation or "any").upper()],
        AclPermissionType.ANY,
    )


_FILTER_OPTIONS = [
    click.option("--principal", help="Only this principal's ACLs."),
    click.option(
        "--operation",
        type=click.Choice(_OPERATIONS, case_sensitive=False),
        help="Only ACLs of this operation.",
    ),
]


def _filter_options(func: Any) -> Any:
    for option in reversed(_FILTER_OPTIONS):
        func = option(func)
    return _resource_options(func)


@acls.command("list")
@_filter_options
@client_options
def list_acls(client: ClientSettings, **selection: Any) -> None:
    """List the ACLs (of one resource, principal or operation if given)."""
    try:
        admin = _admin(client)
        bindings = admin.describe_acls(_filter(**selection)).result(client.timeout + 1)
    except Exception as exc:
        raise ClientError(error_text(exc)) from None
    for binding in bindings:
        click.echo(_show(binding))


@acls.command("remove")
@_filter_options
@click.option("--force", is_flag=True, help="Remove every ACL the filter selects, even all.")
@client_options
def remove(client: ClientSettings, force: bool, **selection: Any) -> None:
    """Remove the ACLs a filter selects (a filter selecting everything needs --force)."""
    acl_filter = _filter(**selection)
    if acl_filter.restype == ResourceType.ANY and not (
        force or selection["principal"] or selection["operation"]
    ):
        raise click.UsageError("this would remove every ACL: narrow it down or give --force")
    admin = _admin(client)
    futures = admin.delete_acls([acl_filter])
    for future in futures.values():
        try:
            removed = future.result(client.timeout + 1)
        except Exception as exc:
            raise ClientError(error_text(exc)) from None
        for binding in removed:
            click.echo(f"removed {_show(binding)}")
