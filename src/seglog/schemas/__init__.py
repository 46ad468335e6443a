"""Schemas: the registry's state in Kafka's `_schemas` topic, the wire format, the schema formats."""
