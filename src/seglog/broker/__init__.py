"""The asyncio broker: Kafka's wire protocol over the storage engine."""
