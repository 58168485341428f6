"""bench.turn_overhead runs a whole turn through the runner as the chat does, to its end. Its
figures are the benchmark's (printed, never asserted): the test only keeps it from breaking
when the runner's collaborators change, as it once did unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.turn_overhead import PHASES

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_runs_its_turns_and_times_every_phase(tmp_path):
    output = tmp_path / "figures.json"
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    argv = [
        sys.executable,
        "-m",
        "bench.turn_overhead",
        "--database-url",
        f"sqlite:///{tmp_path / 'bench.sqlite3'}",
        "--events",
        "20",
        "--memories",
        "20",
        "--turns",
        "3",
        "--warm-up",
        "1",
        "--output",
        str(output),
    ]

    result = subprocess.run(
        argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=240
    )

    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(output.read_text())["figures"]
    timed = {phase for phase in PHASES if phase != "other (hops, glue)"}
    assert {phase for phase in timed if figures[phase]["p50_ms"] > 0} == timed
