"""Every public name of the official ``pulsar`` module (and of ``pulsar.asyncio``) exists in
pulsar_compat, or is in its documented list of what is not offered; the exceptions have the
official hierarchy; the enums have the official members and numbers; signatures accept
the official parameters."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pulsar
import pulsar.asyncio
import pytest

from msgclient import pulsar_compat
from msgclient.pulsar_compat import asyncio as compat_asyncio

# Names the official module has only because it imports them for itself (typing helpers,
# standard modules), not part of its API.
INCIDENTAL = {"Callable", "List", "Optional", "Tuple", "Union", "logging", "re", "timedelta"}
DOC = Path(__file__).parents[2] / "docs" / "pulsar_compat.md"


def official_names(module: types.ModuleType) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_")} - INCIDENTAL


def test_every_official_name_is_offered_or_listed_as_not_offered() -> None:
    missing = {
        name
        for name in official_names(pulsar)
        if not hasattr(pulsar_compat, name) and name not in pulsar_compat.NOT_OFFERED
    }
    assert missing == set()
    offered_and_listed = {n for n in pulsar_compat.NOT_OFFERED if n in vars(pulsar_compat)}
    assert offered_and_listed == set()


def test_not_offered_names_say_why() -> None:
    for name, reason in pulsar_compat.NOT_OFFERED.items():
        with pytest.raises(AttributeError, match=re.escape(reason)):
            getattr(pulsar_compat, name)


def test_docs_table_lists_every_official_name() -> None:
    text = DOC.read_text()
    undocumented = {n for n in official_names(pulsar) if f"`{n}`" not in text}
    assert undocumented == set()


def test_exception_hierarchy_is_the_official_one() -> None:
    official = {
        name: value
        for name, value in vars(pulsar).items()
        if isinstance(value, type) and issubclass(value, pulsar.PulsarException)
    }
    for name, kind in official.items():
        ours = getattr(pulsar_compat, name)
        official_bases = {b.__name__ for b in kind.__mro__ if b.__module__ == "_pulsar"}
        our_bases = {
            b.__name__ for b in ours.__mro__ if issubclass(b, pulsar_compat.PulsarException)
        }
        assert our_bases == official_bases, name
        if kind is not pulsar.PulsarException:
            assert pulsar_compat.Result[name].value == pulsar.Result.__members__[name].value


@pytest.mark.parametrize(
    "name",
    [
        "Result",
        "CompressionType",
        "ConsumerType",
        "InitialPosition",
        "PartitionsRoutingMode",
        "BatchingType",
        "LoggerLevel",
        "KeySharedMode",
        "ProducerAccessMode",
        "RegexSubscriptionMode",
        "ConsumerCryptoFailureAction",
    ],
)
def test_enums_have_the_official_members(name: str) -> None:
    official = {k: int(v) for k, v in getattr(pulsar, name).__members__.items()}
    ours = {k: v.value for k, v in getattr(pulsar_compat, name).__members__.items()}
    assert ours == official


def parameters(function: object) -> list[tuple[str, object]]:
    """Parameter names and defaults; an instance default is compared by its type."""
    signature = inspect.signature(function)  # type: ignore[arg-type]
    out = []
    for p in signature.parameters.values():
        default = p.default
        if hasattr(default, "name") and hasattr(type(default), "__members__"):
            default = default.name  # an enum member: the official ones are pybind's
        elif default is not inspect.Parameter.empty and not isinstance(
            default, int | str | bool | float | type(None)
        ):
            default = "object"
        out.append((p.name, default))
    return out


@pytest.mark.parametrize(
    ("official", "ours"),
    [
        (pulsar.Client.__init__, pulsar_compat.Client.__init__),
        (pulsar.Client.create_producer, pulsar_compat.Client.create_producer),
        (pulsar.Client.subscribe, pulsar_compat.Client.subscribe),
        (pulsar.Client.create_reader, pulsar_compat.Client.create_reader),
        (pulsar.Client.create_table_view, pulsar_compat.Client.create_table_view),
        (pulsar.Producer.send, pulsar_compat.Producer.send),
        (pulsar.Producer.send_async, pulsar_compat.Producer.send_async),
        (pulsar.Consumer.receive, pulsar_compat.Consumer.receive),
        (pulsar.Reader.read_next, pulsar_compat.Reader.read_next),
        (pulsar.MessageId.__init__, pulsar_compat.MessageId.__init__),
        (pulsar.MessageId.deserialize, pulsar_compat.MessageId.deserialize),
        (pulsar.ConsumerDeadLetterPolicy.__init__, pulsar_compat.ConsumerDeadLetterPolicy.__init__),
        (
            pulsar.ConsumerBatchReceivePolicy.__init__,
            pulsar_compat.ConsumerBatchReceivePolicy.__init__,
        ),
        (pulsar.ConsumerKeySharedPolicy.__init__, pulsar_compat.ConsumerKeySharedPolicy.__init__),
        (pulsar.AuthenticationBasic.__init__, pulsar_compat.AuthenticationBasic.__init__),
        (pulsar.ConsoleLogger.__init__, pulsar_compat.ConsoleLogger.__init__),
        (pulsar.FileLogger.__init__, pulsar_compat.FileLogger.__init__),
    ],
)
def test_signatures_take_the_official_parameters(official: object, ours: object) -> None:
    theirs = parameters(official)
    mine = parameters(ours)
    # Our schema defaults are None (meaning BytesSchema()), the official's an instance.
    normalize = {("schema", "object"): ("schema", None)}
    assert [normalize.get(p, p) for p in theirs] == mine


def test_public_methods_of_classes_exist() -> None:
    for name in ("Client", "Producer", "Consumer", "Reader", "Message", "MessageId", "TableView"):
        official = {m for m in dir(getattr(pulsar, name)) if not m.startswith("_")}
        ours = set(dir(getattr(pulsar_compat, name)))
        missing = official - ours - {"wrap"}  # ServiceInfo.wrap: a _pulsar object in
        assert missing == set(), name


def test_asyncio_names() -> None:
    missing = {
        n
        for n in official_names(pulsar.asyncio)
        if not hasattr(compat_asyncio, n)
        and not isinstance(getattr(pulsar.asyncio, n), types.ModuleType)
    }
    assert missing - {"Any", "Callable", "List", "Union", "functools", "timedelta"} == set()
