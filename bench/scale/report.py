"""The scale figures: kept in build/bench-scale.json, printed as a table, plotted in docs/.

The JSON holds every run by label (e.g. "before" and "after" a change) and step, so a later
run adds to it rather than replacing it. The plot shows each latency against the number of
events, p50 and p95 per label, both axes logarithmic, with the target (1.5 times the first step's
p95) dotted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.scale.measures import FIGURES

TARGET_RATIO = 1.5


def results_load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def results_save(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def _ordered_steps(run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(run["steps"].items(), key=lambda item: item[1]["counts"]["events"])


def table_lines(run: dict[str, Any]) -> list[str]:
    """A Markdown table of one run: a row per figure, a column per step, and each figure's
    last step against its first (latencies: p95 ratio, target 1.5x; rates: ratio)."""
    steps = _ordered_steps(run)
    if not steps:
        return []
    header = ["figure", *(f"{name} ({step['counts']['events']:,} events)" for name, step in steps)]
    header.append(f"{steps[-1][0]} / {steps[0][0]}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, (label, kind) in FIGURES.items():
        cells, values = [label], []
        for _, step in steps:
            figure = step["figures"].get(name)
            if figure is None:
                cells.append("-")
                values.append(None)
            elif kind == "ms":
                cells.append(f"{figure['p50_ms']:,.2f} / {figure['p95_ms']:,.2f}")
                values.append(figure["p95_ms"])
            else:
                cells.append(f"{figure['rate']:,.1f}")
                values.append(figure["rate"])
        if values[0] and values[-1] is not None and len(values) > 1:
            cells.append(f"{values[-1] / values[0]:.2f}x")
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(results: dict[str, Any], path: Path) -> None:
    """One panel per latency figure: p50 and p95 of every run against the events stored."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latencies = [(name, label) for name, (label, kind) in FIGURES.items() if kind == "ms"]
    columns = 3
    rows = -(-len(latencies) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for panel, (name, label) in zip(axes.flat, latencies, strict=False):
        for number, (run_label, run) in enumerate(sorted(results["runs"].items())):
            steps = [
                (step["counts"]["events"], step["figures"][name])
                for _, step in _ordered_steps(run)
                if name in step["figures"]
            ]
            if not steps:
                continue
            events = [count for count, _ in steps]
            colour = colours[number % len(colours)]
            panel.plot(
                events,
                [f["p50_ms"] for _, f in steps],
                "o-",
                color=colour,
                label=f"{run_label} p50",
            )
            panel.plot(
                events,
                [f["p95_ms"] for _, f in steps],
                "s--",
                color=colour,
                alpha=0.6,
                label=f"{run_label} p95",
            )
            panel.hlines(
                TARGET_RATIO * steps[0][1]["p95_ms"],
                events[0],
                events[-1],
                colors=colour,
                linestyles="dotted",
                linewidth=1,
            )
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_title(label, fontsize=9)
        panel.set_xlabel("events stored")
        panel.set_ylabel("ms (log)")
        panel.grid(True, which="both", alpha=0.3)
    for panel in list(axes.flat)[len(latencies) :]:
        panel.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.suptitle("Latency as PostgreSQL grows (dotted: 1.5 x the first step's p95)", fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
