"""seglog: a durable, partitioned, append-only message log in Kafka's format."""

__version__ = "0.1.0"
