"""The schema registry served by the broker: Confluent's REST API over `_schemas`."""
