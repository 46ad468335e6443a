"""Which operations each API needs, checked in one place before its handler runs.

Theory of operation
-------------------
With an authorizer configured, :func:`check` is consulted by the dispatcher
for every request. For each API, a *plan* (the table :data:`PLANS`) reads the
request and either

- refuses it whole: it returns the response body to send (an error code on
  the whole response, as Kafka answers a JoinGroup without READ on the group
  with GROUP_AUTHORIZATION_FAILED), and the handler never runs; or
- removes from the request the items the principal may not touch (topics,
  groups, configuration resources), lets the handler answer the rest, and
  adds an error entry for each removed item to the handler's response
  (TOPIC_AUTHORIZATION_FAILED per partition for Produce, for instance).

The operations are Kafka's (``KafkaApis`` and ``AuthHelper``): Produce WRITE
on the topic (and on the transactional id for transactional records), Fetch
READ (a replica's fetch CLUSTER_ACTION on the cluster), ListOffsets DESCRIBE,
OffsetForLeaderEpoch DESCRIBE (or CLUSTER_ACTION on the cluster), Metadata
DESCRIBE (topics not allowed are left out of a list of all topics; creating
one needs CREATE on the cluster or the topic), CreateTopics CREATE,
DeleteTopics DELETE, CreatePartitions ALTER, DeleteRecords DELETE,
DescribeProducers READ, DescribeConfigs DESCRIBE_CONFIGS and the config
changes ALTER_CONFIGS (on the topic, or on the cluster for a broker), the
group APIs READ on the group (OffsetCommit also READ on each topic,
OffsetFetch DESCRIBE), DescribeGroups DESCRIBE, DeleteGroups DELETE,
ListGroups DESCRIBE on the cluster or else only the groups it may DESCRIBE,
InitProducerId WRITE on the transactional id or IDEMPOTENT_WRITE on the
cluster (or WRITE on some topic), and the ACL and SCRAM APIs ALTER or
DESCRIBE on the cluster. ``tests/broker/security/test_authorization_matrix.py``
asks each of them.

Bodies are typed: a plan takes its API's request as generated in
:mod:`seglog.protocol.bodies` (``ProduceRequest``) and returns a
``Decision[ProduceResponse]``, so mypy checks each field a plan reads and each
entry it adds. Every error entry and refusal is built by
:func:`seglog.protocol.entries.failed_as` from the API's response
description: each field at its value in a failed entry (empty records, -1
offsets), so no plan can leave one out.

An API with no plan is refused to everyone but super users (the connection is
closed and a warning logged): a new API is then closed until its checks are
written, never open by omission.

Where things are
----------------
One module per request family, each with its fragment of :data:`PLANS`:
:mod:`.topics` (records, topic metadata and admin, configs), :mod:`.groups`
(membership, offsets, group listings), :mod:`.transactions` (producer ids and
transactions), :mod:`.cluster` (ACLs, cluster tools, quotas, SCRAM, and the
APIs open to everyone). :mod:`.shapes` holds the steps several plans share
(taking denied items out of a request, a whole request on a group or the
cluster); :mod:`.base` the :class:`Access`,
:class:`Decision`, resource types and error codes they are all made of. This
module only composes the table and consults it.
"""

from __future__ import annotations

import logging
from typing import Any

from seglog.broker.security.access import cluster, groups, share, topics, transactions
from seglog.broker.security.access.base import Access, Decision, Plan
from seglog.broker.security.access.groups import describable_topics

logger = logging.getLogger(__name__)

PLANS: dict[int, Plan] = {
    **cluster.PLANS,
    **topics.PLANS,
    **groups.PLANS,
    **transactions.PLANS,
    **share.PLANS,
}
"""API key → its plan."""


def check(access: Access, api_key: int, version: int, body: dict[str, Any]) -> Decision[Any]:
    """The decision for one request (``body`` may be changed: items removed)."""
    plan = PLANS.get(api_key)
    if plan is None:
        if access.principal in access.authorizer.super_users:
            return Decision()
        logger.warning(
            "refusing api key %d to %s: no authorization rule is defined for it",
            api_key,
            access.principal,
        )
        return Decision(close=f"api key {api_key} has no authorization rule")
    return plan(access, version, body)


__all__ = ["PLANS", "Access", "Decision", "check", "describable_topics"]
