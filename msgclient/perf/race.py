"""Rounds of runs, and their summaries: the loop every throughput workload shares.

Each round runs every contender once, one after the other (never two at a time), so that
drift of the machine or the broker hits all alike; a progress line follows each run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

RIVAL = "pulsar-client"


def run_rounds(
    workload: str,
    rounds: int,
    order: Callable[[int], Sequence[str]],
    run: Callable[[str, int], float],
) -> dict[str, list[float]]:
    """``rounds`` rounds of ``run(label, round)`` -> msg/s, for the labels ``order(round)``
    gives; the rates of each label, in the order of the first round."""
    rates: dict[str, list[float]] = {label: [] for label in order(1)}
    runs, total = 0, len(rates) * rounds
    for round_number in range(1, rounds + 1):
        for label in order(round_number):
            rate = run(label, round_number)
            rates[label].append(rate)
            runs += 1
            where = f"round {round_number} [{runs}/{total}] {workload}"
            print(f"  {where} {label:28} {rate:>12,.0f} msg/s", flush=True)
    return rates


def alternating(rows: Sequence[str], round_number: int) -> list[str]:
    """The runs of one round of Pulsar rows: msgclient first in odd rounds, pulsar-client
    first in even ones, so that neither always runs on the warmer broker."""
    order = ("msgclient", RIVAL) if round_number % 2 else (RIVAL, "msgclient")
    return [f"{client} {row}" for row in rows for client in order]


def print_pairs(
    workload: str,
    rows: Sequence[str],
    rates: dict[str, list[float]],
    cpu_us: dict[str, list[float]] | None = None,
) -> None:
    """Each row: the best round of both clients, the range of their rounds, and the ratio;
    with ``cpu_us``, the CPU µs a message of each best round and their ratio (the rival's
    over msgclient's: above 1, msgclient spends less)."""
    rounds = len(next(iter(rates.values())))
    print(f"{workload}: best of {rounds} rounds, msg/s (range of the rounds)")
    cpu_title = f" {'CPU µs/msg (ours, theirs)':>27} {'ratio':>6}" if cpu_us else ""
    print(f"  {'row':14} {'msgclient':>28} {RIVAL:>28} {'ratio':>7}{cpu_title}")
    for row in rows:
        ours, theirs = rates[f"msgclient {row}"], rates[f"{RIVAL} {row}"]
        cpu = ""
        if cpu_us:
            our_cpu = at_best(ours, cpu_us[f"msgclient {row}"])
            their_cpu = at_best(theirs, cpu_us[f"{RIVAL} {row}"])
            cpu = f" {our_cpu:>13.2f} {their_cpu:>13.2f} {their_cpu / our_cpu:>5.2f}x"
        print(
            f"  {row:14} {_best(ours):>28} {_best(theirs):>28} {max(ours) / max(theirs):>6.2f}x"
            + cpu,
            flush=True,
        )


def at_best(rates: list[float], values: list[float]) -> float:
    """The value of the round with the best rate."""
    return values[rates.index(max(rates))]


def _best(rates: list[float]) -> str:
    return f"{max(rates):,.0f} ({min(rates) / 1000:,.0f}k-{max(rates) / 1000:,.0f}k)"
