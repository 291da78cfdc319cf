"""ProtobufNativeSchema: protobuf messages in their own binary encoding, described to the
broker as the Java client's ``ProtobufNativeSchemaData``."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message as ProtobufMessage

from msgclient.schema.schema import Schema
from msgclient.schema_info import SchemaType

if TYPE_CHECKING:  # a message class's descriptors come from upb or from pure Python
    from google._upb._message import FileDescriptor as UpbFileDescriptor

M = TypeVar("M", bound=ProtobufMessage)


def _add_file_descriptors(
    file: FileDescriptor | UpbFileDescriptor,
    visited: set[str],
    into: descriptor_pb2.FileDescriptorSet,
) -> None:
    """Every file ``file`` depends on, dependencies first (the order the official client
    writes, so the definition bytes are the same)."""
    if file.name in visited:
        return
    for dependency in file.dependencies:
        _add_file_descriptors(dependency, visited, into)
    visited.add(file.name)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    into.file.append(proto)


def protobuf_native_definition(message_class: type[ProtobufMessage]) -> dict[str, Any]:
    """The definition as Java's ``ProtobufNativeSchemaUtils.serialize`` writes it."""
    descriptor = message_class.DESCRIPTOR
    files = descriptor_pb2.FileDescriptorSet()
    _add_file_descriptors(descriptor.file, set(), files)
    return {
        "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


class ProtobufNativeSchema(Schema[M]):
    """Instances of a generated protobuf message class."""

    def __init__(self, record_cls: type[M]) -> None:
        if not (isinstance(record_cls, type) and issubclass(record_cls, ProtobufMessage)):
            raise TypeError(f"record_cls must be a protobuf Message subclass, got {record_cls!r}")
        definition = protobuf_native_definition(record_cls)
        super().__init__(record_cls, SchemaType.PROTOBUF_NATIVE, definition, "PROTOBUF_NATIVE")
        self._message = record_cls

    def encode(self, obj: M) -> bytes:
        self._validate_object_type(obj)
        return obj.SerializeToString()

    def decode(self, data: bytes) -> M:
        return self._message.FromString(data)

    def __str__(self) -> str:
        return f"ProtobufNativeSchema({self._message.__name__})"
