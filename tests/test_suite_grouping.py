"""The suite's grouping holds: ``make test`` runs with ``--dist loadgroup``, and the tests that
share a server, a browser or the multi-process stack name a group (``xdist_group``) so that
one worker starts it once. pytest 9.2 silently broke that grouping for pytest-xdist 3.8 (every
group was spread over the workers, each starting the servers again); this runs a small suite
the way ``make test`` does and checks where its tests ran."""

import os
import subprocess
import sys
import textwrap

GROUPED = """
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("shared_server")


@pytest.mark.parametrize("number", range(8))
def test_grouped(number):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    (Path(os.environ["WHERE_RAN"]) / f"grouped-{number}").write_text(worker)
"""

SPREAD = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("number", range(8))
def test_spread(number):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    (Path(os.environ["WHERE_RAN"]) / f"spread-{number}").write_text(worker)
"""


def test_a_group_runs_on_one_worker_and_the_rest_is_shared_out(tmp_path):
    suite = tmp_path / "suite"
    where_ran = tmp_path / "where-ran"
    suite.mkdir()
    where_ran.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_grouped.py").write_text(textwrap.dedent(GROUPED))
    (suite / "test_spread.py").write_text(textwrap.dedent(SPREAD))
    environment = {
        name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider"]

    done = subprocess.run(
        [*command, "-q", "-n", "2", "--dist", "loadgroup", str(suite)],
        cwd=suite,
        env={**environment, "WHERE_RAN": str(where_ran)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    workers = {path.name: path.read_text() for path in where_ran.iterdir()}
    grouped = {workers[f"grouped-{number}"] for number in range(8)}
    assert len(grouped) == 1, f"the group ran on {sorted(grouped)}"
    assert set(workers.values()) == {"gw0", "gw1"}
