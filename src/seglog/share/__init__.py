"""Share groups' partitions (KIP-932): in-flight records, acquisition locks, durable state.

A share group reads a partition together: each record is acquired by one
member under a time lock, then acknowledged (accepted, released or rejected)
one by one. :mod:`.partition` holds one share-partition's state machine;
:mod:`.state` the state as it is persisted; :mod:`.state_records` its
records in ``__share_group_state``, byte for byte as Kafka writes them; and
:mod:`.state_store` the share coordinator that appends and reads them.

Like the group coordinator, this layer takes its clock and timers injected
and knows no sockets or event loop: the broker glues it to ShareFetch.
"""
