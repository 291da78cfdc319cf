"""Generated protobuf bindings for the Pulsar wire protocol (see regenerate.py)."""
