"""The conftest of the pulsar_compat run: `pulsar` and its submodules are pulsar_compat."""

import sys

import msgclient.pulsar_compat as compat
import msgclient.pulsar_compat.asyncio as compat_asyncio
import msgclient.pulsar_compat.schema as compat_schema

sys.modules["pulsar"] = compat
sys.modules["pulsar.asyncio"] = compat_asyncio
sys.modules["pulsar.schema"] = compat_schema
sys.modules["pulsar.schema.schema"] = compat_schema
sys.modules["pulsar.exceptions"] = compat.exceptions
sys.modules["pulsar.tableview"] = compat.tableview
