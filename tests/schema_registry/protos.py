"""Protobuf message classes built from descriptors (no protoc needed) for the tests.

``shop/order.proto`` imports ``shop/common.proto`` (registered as a reference)
and ``google/protobuf/timestamp.proto`` (well known, not registered); it holds
``Header`` (index [0]), ``Order`` ([1]) and ``Order.Line`` ([1, 0]).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

FDP = descriptor_pb2.FieldDescriptorProto
OPTIONAL = FDP.LABEL_OPTIONAL

pool = descriptor_pool.DescriptorPool()
pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)

_common = descriptor_pb2.FileDescriptorProto(
    name="shop/common.proto", package="shop", syntax="proto3"
)
_money = _common.message_type.add(name="Money")
_money.field.add(name="cents", number=1, type=FDP.TYPE_INT64, label=OPTIONAL)
pool.Add(_common)

_order_file = descriptor_pb2.FileDescriptorProto(
    name="shop/order.proto",
    package="shop",
    syntax="proto3",
    dependency=["shop/common.proto", "google/protobuf/timestamp.proto"],
)
_header = _order_file.message_type.add(name="Header")
_header.field.add(name="source", number=1, type=FDP.TYPE_STRING, label=OPTIONAL)
_order = _order_file.message_type.add(name="Order")
_order.field.add(name="id", number=1, type=FDP.TYPE_INT64, label=OPTIONAL)
_order.field.add(name="item", number=2, type=FDP.TYPE_STRING, label=OPTIONAL)
_order.field.add(
    name="price", number=3, type=FDP.TYPE_MESSAGE, type_name=".shop.Money", label=OPTIONAL
)
_order.field.add(
    name="at",
    number=4,
    type=FDP.TYPE_MESSAGE,
    type_name=".google.protobuf.Timestamp",
    label=OPTIONAL,
)
_line = _order.nested_type.add(name="Line")
_line.field.add(name="sku", number=1, type=FDP.TYPE_STRING, label=OPTIONAL)
_line.field.add(name="count", number=2, type=FDP.TYPE_INT32, label=OPTIONAL)
pool.Add(_order_file)


def _cls(name: str) -> type:
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


Money = _cls("shop.Money")
Header = _cls("shop.Header")
Order = _cls("shop.Order")
Line = _cls("shop.Order.Line")
