"""The ``Schema`` of PRODUCER and SUBSCRIBE, from a SchemaInfo, as the official client writes
it: no field at all for raw bytes (no schema, or type NONE: the official BytesSchema)."""

from __future__ import annotations

from msgclient.schema_info import SchemaInfo, SchemaType
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb


def schema_command(info: SchemaInfo | None) -> pb.Schema | None:
    """The Schema message to send, or None when nothing is to be sent."""
    if info is None or info.type is SchemaType.NONE:
        return None
    schema = pb.Schema(
        name=info.schema_name,
        schema_data=info.definition,
        type=pb.Schema.Type.ValueType(info.type.value),  # SchemaType has the same numbers
    )
    schema.properties.extend(pb.KeyValue(key=k, value=v) for k, v in info.properties.items())
    return schema
