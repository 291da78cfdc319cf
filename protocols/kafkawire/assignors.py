"""Consumer group partition assignors and the consumer protocol's metadata bytes.

The assignors give the Java client's results (``RangeAssignor``, ``RoundRobinAssignor``,
``CooperativeStickyAssignor``), so a group may mix our members with Java ones whatever
member the broker picks as leader. They are pure functions of the topics' partition counts
and the members' subscriptions. Rack-aware assignment is not done: it needs the replicas'
racks, which ``partitions_per_topic`` does not carry (Java skips it without them too).
Where Java's sticky result depends on a HashMap's iteration order, we iterate in that same
order (bucket order of Java's hashes; ties in the order of ``members``, which should be the
JoinGroup response's order, as Java's map is filled in that order).

We depart from Java only where it would misbehave: a partition claimed by two members goes
by their member data generations (Java reads the other claimant's v2+ field even when its
generation came in the user data); claims of partitions a topic lacks, or claimed twice by
one member, are ignored; a member subscribed to nothing is not taken as subscribed like
the others; a partition is never moved back to a member no longer subscribed to it.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import attrs

from msgclient.core.send.hashing import java_string_hash
from msgclient.errors import InvalidConfigurationError, MalformedFrameError

TopicPartition = tuple[str, int]


@attrs.frozen
class Subscription:
    """A member's JoinGroup metadata (``ConsumerProtocolSubscription``)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


_Members = Mapping[str, Subscription]


@attrs.frozen
class Assignment:
    """A member's SyncGroup assignment (``ConsumerProtocolAssignment``)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


class Assignor(Protocol):
    name: str  # the protocol name in JoinGroup, as Java names it
    supports_cooperative: bool

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: _Members
    ) -> dict[str, Assignment]: ...

    def user_data(self, owned: Iterable[TopicPartition], generation_id: int) -> bytes | None: ...


def _java_order(member_id: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units, which big-endian UTF-16 bytes keep.
    return member_id.encode("utf-16-be", "surrogatepass")


def _hash_bucket(java_hash: int, mask: int) -> int:
    return (java_hash ^ (java_hash >> 16)) & mask  # java.util.HashMap's bucket index


def _table_mask(size: int, mask: int = 15) -> int:
    """The bucket mask of a HashMap that grew to ``size`` entries (load factor 0.75)."""
    while size > (mask + 1) * 3 // 4:
        mask = mask * 2 + 1
    return mask


def _hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``HashMap<String, ?>`` filled with ``keys`` in this order."""
    keys = list(keys)
    mask = _table_mask(len(keys))
    return sorted(keys, key=lambda k: _hash_bucket(java_string_hash(k), mask))


def _prepare(
    partitions_per_topic: Mapping[str, int], members: _Members
) -> tuple[dict[str, int], list[str], dict[str, set[str]]]:
    """Counts of the subscribed topics that exist, members in Java order, topic sets."""
    topics = {m: set(sub.topics) for m, sub in members.items()}
    wanted: set[str] = set()
    for subscribed in topics.values():
        wanted |= subscribed
    counts = {t: n for t, n in partitions_per_topic.items() if n > 0 and t in wanted}
    return counts, sorted(members, key=_java_order), topics


def _result(assigned: Mapping[str, Iterable[TopicPartition]]) -> dict[str, Assignment]:
    return {m: Assignment(tuple(sorted(tps))) for m, tps in assigned.items()}


class _EagerAssignor:
    supports_cooperative = False

    def user_data(self, owned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        return None  # as Java's: these assignors need nothing in the subscription


class RangeAssignor(_EagerAssignor):
    """Per topic, consecutive partition ranges to the subscribed members in id order; the
    first ``partitions % members`` get one more."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: _Members
    ) -> dict[str, Assignment]:
        counts, order, topics = _prepare(partitions_per_topic, members)
        assigned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for topic, count in counts.items():
            consumers = [m for m in order if topic in topics[m]]
            per, extra = divmod(count, len(consumers))
            start = 0
            for i, member in enumerate(consumers):
                end = start + per + (i < extra)
                assigned[member].extend((topic, p) for p in range(start, end))
                start = end
        return _result(assigned)


class RoundRobinAssignor(_EagerAssignor):
    """All partitions sorted by (topic, partition) dealt in turn to the members in id
    order, skipping a member not subscribed to the partition's topic."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: _Members
    ) -> dict[str, Assignment]:
        counts, order, topics = _prepare(partitions_per_topic, members)
        assigned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        turn = 0
        for topic in sorted(counts):
            for partition in range(counts[topic]):
                while topic not in topics[order[turn]]:
                    turn = (turn + 1) % len(order)
                assigned[order[turn]].append((topic, partition))
                turn = (turn + 1) % len(order)
        return _result(assigned)


class CooperativeStickyAssignor:
    """Java's ``CooperativeStickyAssignor``: a balanced assignment that keeps as many owned
    partitions as it can. A partition moving to another member is left out of this round
    (its owner revokes it and rejoins); the next rebalance hands it to its new owner."""

    name = "cooperative-sticky"
    supports_cooperative = True

    def user_data(self, owned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        # Java puts only the generation here (an int32), for subscriptions below v2 that
        # have no generation field; the owned partitions travel in the subscription.
        return struct.pack(">i", generation_id)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: _Members
    ) -> dict[str, Assignment]:
        if not members:
            return {}
        counts, _, topics = _prepare(partitions_per_topic, members)
        order = _hashmap_order(members)
        generations = {m: _generation(members[m]) for m in order}
        owned, multiple, all_equal = _owned_partitions(counts, order, members, generations)
        moving: dict[TopicPartition, str]
        if all_equal:
            assigned, moving = _constrained(counts, order, owned, multiple)
        else:
            assigned = _General(counts, order, topics, owned, generations, members).build()
            added: dict[TopicPartition, str] = {}
            revoked: set[TopicPartition] = set()
            for m, tps in assigned.items():
                before = set(members[m].owned_partitions)
                added.update((tp, m) for tp in tps if tp not in before)
                revoked.update(before.difference(tps))
            moving = {tp: m for tp, m in added.items() if tp in revoked}
        for tp, m in moving.items():
            assigned[m].remove(tp)
        return _result(assigned)


def _generation(sub: Subscription) -> int:
    """Java's ``memberData`` generation: the v2+ field, else the int32 in the user data;
    -1 when there is none (Java's absent and DEFAULT_GENERATION act alike)."""
    if sub.generation_id >= 0:
        return sub.generation_id
    data = sub.user_data
    if data is None or len(data) < 4:
        return -1
    return max(-1, int.from_bytes(data[:4], "big", signed=True))


def _owned_partitions(
    counts: Mapping[str, int], order: list[str], members: _Members, gens: Mapping[str, int]
) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition], bool]:
    """Each member's claimed partitions of existing topics, a partition claimed twice going
    to the higher generation (to nobody on a tie); and whether all subscribe alike."""
    owned: dict[str, list[TopicPartition]] = {}
    owner: dict[TopicPartition, str] = {}
    multiple: set[TopicPartition] = set()
    first = set(members[order[0]].topics)
    all_equal = all(set(members[m].topics) == first for m in order)
    for m in order:
        mine = owned[m] = []
        for tp in dict.fromkeys(members[m].owned_partitions):
            if tp[0] not in counts or not 0 <= tp[1] < counts[tp[0]]:
                continue
            other = owner.get(tp)
            if other is not None:
                if gens[m] < gens[other]:
                    continue
                if tp in owned[other]:  # not if it lost the partition to a tie already
                    owned[other].remove(tp)
                if gens[m] == gens[other]:
                    multiple.add(tp)
                    owner[tp] = m
                    continue
            mine.append(tp)
            owner[tp] = m
    return owned, multiple, all_equal


def _constrained(
    counts: Mapping[str, int],
    order: list[str],
    owned: Mapping[str, list[TopicPartition]],
    multiple: set[TopicPartition],
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """Java's ``ConstrainedAssignmentBuilder``, for members that all subscribe alike: keep
    owned partitions up to the quota, then deal the rest round robin to unfilled members."""
    total = sum(counts.values())
    min_quota, expected_over = divmod(total, len(order))
    max_quota = min_quota + (expected_over > 0)
    over = 0
    assigned: dict[str, list[TopicPartition]] = {m: [] for m in order}
    maybe_revoked: dict[TopicPartition, str] = {}
    under: list[str] = []
    exactly_min: deque[str] = deque()
    for m in order:
        mine = sorted((tp for tp in owned[m] if tp not in multiple), key=lambda tp: (tp[1], tp[0]))
        if len(mine) < min_quota:
            keep = len(mine)
            under.append(m)
        elif len(mine) >= max_quota and over < expected_over:
            keep = max_quota
            over += 1
            if over == expected_over:
                exactly_min.clear()
        else:
            keep = min_quota
            if over < expected_over:
                exactly_min.append(m)
        assigned[m].extend(mine[:keep])
        maybe_revoked.update((tp, m) for tp in mine[keep:])
    taken = {tp for tps in assigned.values() for tp in tps}
    unassigned = [(t, p) for t in sorted(counts) for p in range(counts[t]) if (t, p) not in taken]
    under.sort(key=_java_order)
    exactly_min = deque(sorted(exactly_min, key=_java_order))
    moving: dict[TopicPartition, str] = {}
    i = 0  # Java walks ``under`` with an iterator that removes filled members
    for tp in unassigned:
        from_under = True
        if i < len(under):
            member = under[i]
            i += 1
        elif under:
            member, i = under[0], 1
        elif exactly_min:
            member, from_under = exactly_min.popleft(), False
        else:
            raise AssertionError("sticky assignment: no unfilled member left")
        assigned[member].append(tp)
        if tp in multiple or maybe_revoked.get(tp, member) != member:
            moving[tp] = member
        count = len(assigned[member])
        if count == min_quota and from_under:
            i -= 1
            del under[i]
            exactly_min.append(member)
        elif count == max_quota:
            over += 1
    return assigned, moving


class _General:
    """Java's ``GeneralAssignmentBuilder``, for members subscribing to different topics:
    keep the owned partitions, give each unassigned one to the least loaded subscriber,
    then move partitions from the most to the least loaded while that improves balance."""

    def __init__(
        self,
        counts: Mapping[str, int],
        order: list[str],
        topics: Mapping[str, set[str]],
        owned: dict[str, list[TopicPartition]],
        generations: Mapping[str, int],
        members: _Members,
    ) -> None:
        self.counts, self.topics = counts, topics
        self.key = {m: _java_order(m) for m in order}
        self.topic_consumers = {t: [m for m in order if t in topics[m]] for t in counts}
        self.consumer_topics = {m: [t for t in counts if t in topics[m]] for m in order}
        self.current, self.owner = owned, {tp: m for m, tps in owned.items() for tp in tps}
        by_consumers = sorted(counts, key=lambda t: (len(self.topic_consumers[t]), t))
        self.all_partitions = [(t, p) for t in by_consumers for p in range(counts[t])]
        self.active = set(order)
        # movements[tp] = (first owner, current owner); by_pair indexes them per topic
        self.movements: dict[TopicPartition, tuple[str, str]] = {}
        self.by_pair: dict[tuple[str, str, str], dict[TopicPartition, None]] = {}
        self.pair_mask: dict[tuple[str, str, str], int] = {}  # a HashSet never shrinks
        # a partition's owner in the latest generation below the newest (Java's
        # prevAssignment): moving it back there is preferred
        self.previous: dict[TopicPartition, tuple[str, int]] = {}
        newest = max(generations.values())
        for m in order:
            if generations[m] < newest:
                for tp in members[m].owned_partitions:
                    if tp not in self.previous or generations[m] > self.previous[tp][1]:
                        self.previous[tp] = (m, generations[m])

    def sorted_active(self) -> list[str]:
        return sorted(self.active, key=lambda m: (len(self.current[m]), self.key[m]))

    def max_size(self, m: str) -> int:
        return sum(self.counts[t] for t in self.consumer_topics[m])

    def build(self) -> dict[str, list[TopicPartition]]:
        revocation_required = False
        for m, tps in self.current.items():
            for tp in [tp for tp in tps if tp[0] not in self.topics[m]]:
                tps.remove(tp)
                del self.owner[tp]
                revocation_required = True
        unassigned = [tp for tp in self.all_partitions if tp not in self.owner]
        initializing = not any(self.current.values())
        for tp in unassigned:
            for m in self.sorted_active():
                if tp[0] in self.consumer_topics[m]:
                    self.current[m].append(tp)
                    self.owner[tp] = m
                    break
        # Only partitions of topics with two or more consumers, and consumers that could
        # gain or lose one, take part in the balancing.
        shared = {t for t, ms in self.topic_consumers.items() if len(ms) >= 2}
        reassignable = [tp for tp in self.all_partitions if tp[0] in shared]
        unassigned = [tp for tp in unassigned if tp[0] in shared]
        fixed = {}
        for m in list(self.active):
            tps = self.current[m]
            if len(tps) >= self.max_size(m) and not any(tp[0] in shared for tp in tps):
                self.active.discard(m)
                fixed[m] = self.current.pop(m)
        before = {m: list(tps) for m, tps in self.current.items()}
        before_owner = dict(self.owner)
        if not revocation_required:
            self.reassign_all(unassigned)  # Java ignores whether this one moved anything
        moved = self.reassign_all(reassignable)
        if not initializing and moved and self.score(self.current) >= self.score(before):
            self.current, self.owner = before, before_owner
        self.current.update(fixed)
        return self.current

    @staticmethod
    def score(assignment: Mapping[str, list[TopicPartition]]) -> int:
        sizes = [len(tps) for tps in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])

    def is_balanced(self) -> bool:
        ordered = self.sorted_active()
        if len(self.current[ordered[0]]) >= len(self.current[ordered[-1]]) - 1:
            return True
        for m in ordered:
            size = len(self.current[m])
            if size == self.max_size(m):
                continue
            for t in self.consumer_topics[m]:
                for p in range(self.counts[t]):
                    other = self.owner.get((t, p))
                    if other != m and other in self.active and size + 1 < len(self.current[other]):
                        return False
        return True

    def reassign_all(self, partitions: list[TopicPartition]) -> bool:
        moved_any = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self.is_balanced():
                    break
                size = len(self.current[self.owner[tp]])
                prev = self.previous.get(tp)
                if (
                    prev is not None
                    and prev[0] in self.active
                    and tp[0] in self.topics[prev[0]]
                    and size > len(self.current[prev[0]]) + 1
                ):
                    self.move(tp, prev[0])
                    moved_any = modified = True
                    continue
                for other in self.topic_consumers[tp[0]]:
                    if other in self.active and size > len(self.current[other]) + 1:
                        target = next(
                            m for m in self.sorted_active() if tp[0] in self.consumer_topics[m]
                        )
                        self.move(tp, target)
                        moved_any = modified = True
                        break
        return moved_any

    def move(self, tp: TopicPartition, new: str) -> None:
        old = self.owner[tp]
        # Stickiness: if a partition of this topic went new -> old earlier, move that one
        # back instead of moving a second partition between the same pair.
        src = self.movements[tp][0] if tp in self.movements else old
        reverse = self.by_pair.get((tp[0], new, src))
        if reverse:
            # Java takes the first of a HashSet<TopicPartition>, whose hashCode is
            # 31 * (31 + partition) + topic.hashCode().
            topic_hash, mask = java_string_hash(tp[0]), self.pair_mask[(tp[0], new, src)]
            tp = min(reverse, key=lambda q: _hash_bucket(31 * (31 + q[1]) + topic_hash, mask))
            old = self.owner[tp]
        if tp in self.movements:
            first, last = self.movements.pop(tp)
            pair = self.by_pair[(tp[0], first, last)]
            del pair[tp]
            if not pair:
                del self.by_pair[(tp[0], first, last)], self.pair_mask[(tp[0], first, last)]
        else:
            first = old
        if first != new:
            self.movements[tp] = (first, new)
            key = (tp[0], first, new)
            pair = self.by_pair.setdefault(key, {})
            pair[tp] = None
            self.pair_mask[key] = _table_mask(len(pair), self.pair_mask.get(key, 15))
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.owner[tp] = new


ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)
}

# -- ConsumerProtocol bytes: int16 version, then the schema's fields ---------------------
# Both schemas have versions 0-3 (subscription: v1 owned partitions, v2 generation, v3
# rack; the assignment is the same in all). Java writes v3, kafka-python v0 (v1 for
# cooperative-sticky); we write v1 unless told, which every client since Kafka 2.4 reads
# fully. Newer versions only append fields, so a higher version reads as v3 (as Java does).

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HIGHEST = 3


def encode_subscription(sub: Subscription, version: int = 1) -> bytes:
    """``sub`` in ``version``: fields that version lacks are left out (Java's topics and
    owned partitions come sorted, so ours do too)."""
    out = [_version(version), _I32.pack(len(sub.topics))]
    out.extend(_string(t) for t in sorted(sub.topics))
    out.append(_bytes(sub.user_data))
    if version >= 1:
        out.append(_topic_partitions(sorted(sub.owned_partitions)))
    if version >= 2:
        out.append(_I32.pack(sub.generation_id))
    if version >= 3:
        out.append(_I16.pack(-1) if sub.rack_id is None else _string(sub.rack_id))
    return b"".join(out)


def encode_assignment(assignment: Assignment, version: int = 1) -> bytes:
    return b"".join(
        (_version(version), _topic_partitions(assignment.partitions), _bytes(assignment.user_data))
    )


def decode_subscription(data: bytes) -> Subscription:
    """A member's metadata from JoinGroup; ``MalformedFrameError`` if it does not parse."""
    r = _Reader(data, "subscription")
    version = r.number(_I16, minimum=0)
    topics = tuple(r.string() for _ in range(r.number(minimum=0)))
    user_data = r.nullable_bytes()
    owned = r.topic_partitions() if version >= 1 else ()
    generation = r.number() if version >= 2 else -1
    rack = r.nullable_string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack or None)  # Java: "" is none


def decode_assignment(data: bytes) -> Assignment:
    """A member's assignment from SyncGroup; ``MalformedFrameError`` if it does not parse."""
    r = _Reader(data, "assignment")
    r.number(_I16, minimum=0)
    partitions = r.topic_partitions()
    return Assignment(partitions, r.nullable_bytes())


def _version(version: int) -> bytes:
    if not 0 <= version <= _HIGHEST:
        raise InvalidConfigurationError(f"consumer protocol version {version}: expected 0..3")
    return _I16.pack(version)


def _string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise InvalidConfigurationError(f"string too long for the consumer protocol: {text!r}")
    return _I16.pack(len(raw)) + raw


def _bytes(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


def _topic_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}  # topics in order of first appearance, as Java
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = [_I32.pack(len(by_topic))]
    for topic, numbers in by_topic.items():
        out += (_string(topic), struct.pack(f">i{len(numbers)}i", len(numbers), *numbers))
    return b"".join(out)


class _Reader:
    """Reads the protocol's primitives, raising ``MalformedFrameError`` on bad bytes."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = bytes(data), 0, what

    def error(self, problem: str) -> MalformedFrameError:
        return MalformedFrameError(f"consumer protocol {self.what}: {problem} at byte {self.pos}")

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise self.error(f"{size} bytes needed, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def number(self, kind: struct.Struct = _I32, minimum: int = -(2**31)) -> int:
        value: int = kind.unpack(self.take(kind.size))[0]
        if value < minimum:
            raise self.error(f"{value} where at least {minimum} is expected")
        return value

    def nullable_string(self) -> str | None:
        size = self.number(_I16)
        if size < 0:
            return None
        try:
            return self.take(size).decode()
        except UnicodeDecodeError as error:
            raise self.error(f"string not UTF-8 ({error})") from error

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise self.error("null string")
        return text

    def nullable_bytes(self) -> bytes | None:
        size = self.number()
        return None if size < 0 else self.take(size)

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        result: list[TopicPartition] = []
        for _ in range(self.number(minimum=0)):
            topic = self.string()
            count = self.number(minimum=0)
            numbers = struct.unpack(f">{count}i", self.take(4 * count))
            result.extend((topic, p) for p in numbers)
        return tuple(result)
