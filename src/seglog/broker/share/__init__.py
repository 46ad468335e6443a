"""The broker's side of share groups: share sessions and the share-partitions it leads.

:mod:`.sessions` keeps ShareFetch's sessions (KIP-932's share session cache);
:mod:`.partitions` creates, initializes, persists and wakes the
share-partitions of :mod:`seglog.share.partition` for the partitions this
node leads. The ShareFetch and ShareAcknowledge handlers
(:mod:`seglog.broker.handlers.share_fetch`) glue them to the wire.
"""
