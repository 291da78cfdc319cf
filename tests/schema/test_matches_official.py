"""Random records, built alike in the official ``pulsar.schema`` and in msgclient.schema:
the same Avro definitions, the same JSON and Avro bytes, and each decodes the other's."""

from __future__ import annotations

from typing import Any

import pulsar.schema as official
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import msgclient.schema as ours
from tests.schema.twins import Builder, official_schema_info, outcome, record_specs, record_values

EXAMPLES = settings(
    max_examples=300,
    database=None,  # no .hypothesis/ in the work tree; failures print their blob
    print_blob=True,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@EXAMPLES
@given(st.data())
def test_random_records_encode_decode_and_describe_as_official(data: st.DataObject) -> None:
    spec = data.draw(record_specs())
    theirs, mine = Builder(official), Builder(ours)
    their_class = outcome(lambda: theirs.record_class(spec))
    our_class = outcome(lambda: mine.record_class(spec))
    assert our_class[0] == their_class[0]  # a default of the wrong type fails in both
    if our_class[0] == "error":
        return
    assert outcome(our_class[1].schema) == outcome(their_class[1].schema)

    value = data.draw(record_values(spec))
    their_record = outcome(lambda: theirs.instance(spec, value))
    our_record = outcome(lambda: mine.instance(spec, value))
    assert our_record[0] == their_record[0], (our_record, their_record)
    event(f"record {our_record[0]}")
    if our_record[0] == "error":
        return
    for name in ("JsonSchema", "AvroSchema"):
        compare_codecs(
            getattr(official, name),
            getattr(ours, name),
            their_class[1],
            our_class[1],
            their_record[1],
            our_record[1],
        )


def compare_codecs(
    official_codec: Any,
    our_codec: Any,
    their_class: type,
    our_class: type,
    their_record: Any,
    our_record: Any,
) -> None:
    their_schema = outcome(lambda: official_codec(their_class))
    our_schema = outcome(lambda: our_codec(our_class))
    if their_schema[0] == our_schema[0] == "ok":
        assert our_schema[1].schema_info() == official_schema_info(their_schema[1])
    # fastavro checks our Avro definition when the schema is made, theirs at the first
    # encode: either way, both fail or both give the same bytes.
    their_bytes = outcome(lambda: their_schema[1].encode(their_record))
    our_bytes = outcome(lambda: our_schema[1].encode(our_record))
    assert our_bytes == their_bytes
    event(f"{our_codec.__name__} encode {our_bytes[0]}")
    if our_bytes[0] == "error":
        return
    payload = our_bytes[1]
    # Where the official decodes the payload, ours decodes it to the same values, and both
    # encode them back to the payload. (The official refuses some payloads that ours takes:
    # a str-valued enum in JSON.)
    their_value = outcome(lambda: their_schema[1].decode(payload))
    event(f"{our_codec.__name__} official decode {their_value[0]}")
    if their_value[0] == "ok":
        decoded = our_schema[1].decode(payload)
        assert field_values(decoded) == field_values(their_value[1])
        assert our_schema[1].encode(decoded) == payload
        assert their_schema[1].encode(their_value[1]) == payload
        if official_codec is official.AvroSchema:  # JSON loses bytes in arrays and maps
            assert decoded == our_record


def field_values(value: Any) -> Any:
    """A record of either module as nested dicts of its fields' values."""
    if hasattr(value, "_fields"):
        return {name: field_values(getattr(value, name)) for name in value._fields}
    if isinstance(value, list):
        return [field_values(item) for item in value]
    if isinstance(value, dict):
        return {key: field_values(item) for key, item in value.items()}
    return value
