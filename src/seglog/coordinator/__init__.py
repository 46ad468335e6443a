"""Consumer groups: the group state machine, the coordinator and ``__consumer_offsets``."""
