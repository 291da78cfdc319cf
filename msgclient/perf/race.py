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


def print_pairs(workload: str, rows: Sequence[str], rates: dict[str, list[float]]) -> None:
    """Each row: the best round of both clients, the range of their rounds, and the ratio."""
    rounds = len(next(iter(rates.values())))
    print(f"{workload}: best of {rounds} rounds, msg/s (range of the rounds)")
    print(f"  {'row':14} {'msgclient':>28} {RIVAL:>28} {'ratio':>7}")
    for row in rows:
        ours, theirs = rates[f"msgclient {row}"], rates[f"{RIVAL} {row}"]
        print(
            f"  {row:14} {_best(ours):>28} {_best(theirs):>28} {max(ours) / max(theirs):>6.2f}x",
            flush=True,
        )


def _best(rates: list[float]) -> str:
    return f"{max(rates):,.0f} ({min(rates) / 1000:,.0f}k-{max(rates) / 1000:,.0f}k)"
