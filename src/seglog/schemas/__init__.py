"""Schemas: the registry kept in the `_schemas` topic, the wire format, the schema formats."""
