"""Charts of a benchmark run: throughput bars and latency distributions, as one PNG.

Needs matplotlib (``pip install msgclient[perf]``); imported only when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path

from msgclient.errors import InvalidConfigurationError


def save_plot(
    path: Path,
    rates: dict[str, dict[str, float]],
    latencies: dict[str, list[float]],
) -> None:
    """``rates``: workload -> client -> msg/s; ``latencies``: client -> seconds."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError as error:
        raise InvalidConfigurationError(
            "--plot needs matplotlib: pip install msgclient[perf]"
        ) from error
    # Kafka panels have up to 8 bars: wider panels, and one colour per client (rows of the
    # same client at other settings share it).
    widths = [max(5.0, 0.9 * len(by_client)) for by_client in rates.values()]
    widths += [5.0] if latencies else []
    figure, axes = plt.subplots(
        1,
        len(widths),
        figsize=(sum(widths), 4.5),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    colours: dict[str, str] = {}
    for axis, (workload, by_client) in zip(axes[0], rates.items(), strict=False):
        names = list(by_client)
        clients = [name.split()[0] for name in names]
        for client in clients:
            colours.setdefault(client, f"C{len(colours)}")
        bars = axis.bar(
            names, [by_client[n] / 1000 for n in names], color=[colours[c] for c in clients]
        )
        axis.bar_label(bars, fmt="%.0fk")
        axis.margins(y=0.15)  # room for the labels
        axis.set_title(f"{workload} (best round)")
        axis.set_ylabel("thousand msg/s")
        if len(names) > 2:
            axis.tick_params(axis="x", labelrotation=30)
            for label in axis.get_xticklabels():
                label.set_horizontalalignment("right")
    if latencies:
        axis = axes[0][-1]
        for name, values in latencies.items():
            ordered = sorted(v * 1000 for v in values)
            fractions = [(i + 1) / len(ordered) for i in range(len(ordered))]
            axis.plot(ordered, fractions, label=name)
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.xaxis.set_major_formatter(ticker.ScalarFormatter())
        axis.xaxis.set_minor_formatter(ticker.NullFormatter())
        axis.set_xlabel("publish to receive, ms (log)")
        axis.set_ylabel("fraction of messages")
        axis.set_title("latency distribution")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
