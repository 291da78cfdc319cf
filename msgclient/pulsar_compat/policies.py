"""The consumer policies of the official client, with its positional signatures:
``BatchReceivePolicy(10, -1, 100)``, ``ConsumerDeadLetterPolicy(5, "dlq-topic")``,
``ConsumerKeySharedPolicy(KeySharedMode.Sticky, False, [(0, 32767)])`` and the lower-level
``KeySharedPolicy`` / ``DeadLetterPolicyBuilder`` they wrap there."""

from __future__ import annotations

import attrs

from msgclient import options as core
from msgclient.pulsar_compat.enums import KeySharedMode, to_msgclient

MIB = 1024 * 1024


class BatchReceivePolicy:
    """``BatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)``; a value below 0
    means no limit."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        self._max_num_messages = max_num_message
        self._max_num_bytes = max_num_bytes
        self._timeout_ms = timeout_ms
        self.to_msgclient()  # refuse a bad policy here, as the official constructor

    def getMaxNumMessages(self) -> int:
        return self._max_num_messages

    def getMaxNumBytes(self) -> int:
        return self._max_num_bytes

    def getTimeoutMs(self) -> int:
        return self._timeout_ms

    def to_msgclient(self) -> core.BatchReceivePolicy:
        return core.BatchReceivePolicy(
            max_num_messages=max(self._max_num_messages, -1),
            max_num_bytes=max(self._max_num_bytes, -1),
            timeout_ms=max(self._timeout_ms, 0),
        )


class ConsumerBatchReceivePolicy:
    """``ConsumerBatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)``, what
    ``subscribe(batch_receive_policy=...)`` takes."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        self._policy = BatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)

    def policy(self) -> BatchReceivePolicy:
        return self._policy


class KeySharedPolicy:
    """The official low-level Key_Shared policy, set up by its setters."""

    def __init__(self) -> None:
        self._mode = KeySharedMode.AutoSplit
        self._allow_out_of_order_delivery = False
        self._sticky_ranges: list[tuple[int, int]] = []

    def set_key_shared_mode(self, mode: KeySharedMode) -> None:
        self._mode = mode

    def get_key_shared_mode(self) -> KeySharedMode:
        return self._mode

    def set_allow_out_of_order_delivery(self, allow: bool) -> None:
        self._allow_out_of_order_delivery = allow

    def is_allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order_delivery

    def set_sticky_ranges(self, ranges: list[tuple[int, int]]) -> None:
        """Inclusive (start, end) hash ranges within 0..65535 that do not overlap; others
        raise ValueError (msgclient's InvalidConfigurationError), as in the official client
        (which also lets a reversed range through to the broker; this refuses it)."""
        checked = core.KeySharedPolicy(core.KeySharedMode.Sticky, sticky_ranges=ranges)
        self._sticky_ranges = list(checked.sticky_ranges or ())

    def get_sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._sticky_ranges)

    def to_msgclient(self) -> core.KeySharedPolicy:
        return core.KeySharedPolicy(
            key_shared_mode=to_msgclient(self._mode, core.KeySharedMode),
            allow_out_of_order_delivery=self._allow_out_of_order_delivery,
            sticky_ranges=self._sticky_ranges or None,
        )


class ConsumerKeySharedPolicy:
    """``ConsumerKeySharedPolicy(key_shared_mode, allow_out_of_order_delivery,
    sticky_ranges)``: Sticky needs ``sticky_ranges`` (hash ranges within 0..65535)."""

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        if key_shared_mode == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError(
                "When using key_shared_mode = KeySharedMode.Sticky you must also provide "
                "sticky_ranges"
            )
        self._policy = KeySharedPolicy()
        self._policy.set_key_shared_mode(key_shared_mode)
        self._policy.set_allow_out_of_order_delivery(allow_out_of_order_delivery)
        if sticky_ranges is not None:
            self._policy.set_sticky_ranges(sticky_ranges)

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._policy.get_key_shared_mode()

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._policy.is_allow_out_of_order_delivery()

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return self._policy.get_sticky_ranges()

    def policy(self) -> KeySharedPolicy:
        return self._policy


@attrs.frozen
class BuiltDeadLetterPolicy:
    """What ``DeadLetterPolicyBuilder.build()`` gives, with the official getters."""

    max_redeliver_count: int
    dead_letter_topic: str
    initial_subscription_name: str

    def getMaxRedeliverCount(self) -> int:
        return self.max_redeliver_count

    def getDeadLetterTopic(self) -> str:
        return self.dead_letter_topic

    def getInitialSubscriptionName(self) -> str:
        return self.initial_subscription_name

    def to_msgclient(self) -> core.DeadLetterPolicy:
        return core.DeadLetterPolicy(
            max_redeliver_count=self.max_redeliver_count,
            dead_letter_topic=self.dead_letter_topic or None,
            initial_subscription_name=self.initial_subscription_name or None,
        )


class DeadLetterPolicyBuilder:
    """The official builder: ``maxRedeliverCount(n)``, ``deadLetterTopic(t)``,
    ``initialSubscriptionName(s)``, ``build()``."""

    def __init__(self) -> None:
        self._max_redeliver_count = -1
        self._dead_letter_topic = ""
        self._initial_subscription_name = ""

    def maxRedeliverCount(self, count: int) -> DeadLetterPolicyBuilder:
        self._max_redeliver_count = count
        return self

    def deadLetterTopic(self, topic: str) -> DeadLetterPolicyBuilder:
        self._dead_letter_topic = topic
        return self

    def initialSubscriptionName(self, name: str) -> DeadLetterPolicyBuilder:
        self._initial_subscription_name = name
        return self

    def build(self) -> BuiltDeadLetterPolicy:
        return BuiltDeadLetterPolicy(
            self._max_redeliver_count, self._dead_letter_topic, self._initial_subscription_name
        )


class ConsumerDeadLetterPolicy:
    """``ConsumerDeadLetterPolicy(max_redeliver_count, dead_letter_topic=None,
    initial_subscription_name=None)``; the default dead-letter topic is
    ``<topic>-<subscription>-DLQ`` ('' here until a consumer names it, as the official)."""

    def __init__(
        self,
        max_redeliver_count: int,
        dead_letter_topic: str | None = None,
        initial_subscription_name: str | None = None,
    ) -> None:
        if max_redeliver_count is None or max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be greater than 0")
        builder = DeadLetterPolicyBuilder().maxRedeliverCount(max_redeliver_count)
        if dead_letter_topic is not None:
            builder.deadLetterTopic(dead_letter_topic)
        if initial_subscription_name is not None:
            builder.initialSubscriptionName(initial_subscription_name)
        self._policy = builder.build()

    @property
    def dead_letter_topic(self) -> str:
        return self._policy.dead_letter_topic

    @property
    def max_redeliver_count(self) -> int:
        return self._policy.max_redeliver_count

    @property
    def initial_subscription_name(self) -> str:
        return self._policy.initial_subscription_name

    def policy(self) -> BuiltDeadLetterPolicy:
        return self._policy


# msgclient's earlier name for it (issue 10 asked for both spellings to work).
DeadLetterPolicy = ConsumerDeadLetterPolicy
