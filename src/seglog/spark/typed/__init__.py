"""Typed ``key``/``value`` columns: records in a schema registry's wire format, read and
written as Spark structs.

``valueFormat`` / ``keyFormat`` (``binary``, the default, keeps Spark's bytes)
name the format of records serialized by Confluent's serializers (magic byte
0, the schema id, the Avro binary / JSON text / Protobuf message):

* :mod:`~seglog.spark.typed.registry`: the schemas, from a registry's REST API
  or from a log directory's ``_schemas``;
* :mod:`~seglog.spark.typed.avro_types`, :mod:`~seglog.spark.typed.json_types`,
  :mod:`~seglog.spark.typed.protobuf_types`: each format's schemas as Spark
  types, its decoded values as Arrow input (and back, for the sink);
* :mod:`~seglog.spark.typed.codecs`: one registered schema parsed, with its
  decoder and encoder;
* :mod:`~seglog.spark.typed.read`: the columns planned on the driver, decoded
  in the tasks;
* :mod:`~seglog.spark.typed.write`: the sink's encoding of struct columns.
"""
