"""Record batches as bytes: Kafka's v2 format, legacy v0/v1 message sets, codecs.

Nothing in this package touches files, sockets or clocks.
"""
