"""The suite's grouping holds: ``make test`` runs with ``--dist loadgroup``, and the tests that
share a server, a browser or the multi-process stack are in a group (``xdist_group``), named by
their module or given by tests/xdist_groups.py, so that one worker starts it once. Both ways
once broke silently, each time spreading groups over the workers, each starting the servers
again: pytest 9.2 for pytest-xdist 3.8, and a hook that added groups after xdist had read them.
This runs a small suite the way ``make test`` does and checks where its tests ran."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RECORD = """
import os
from pathlib import Path

import pytest


def record(name):
    node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
    (Path(os.environ["WHERE_RAN"]) / name).write_text(f"{os.environ['PYTEST_XDIST_WORKER']} {node}")
"""

MODULES = {
    "test_named.py": """
        pytestmark = pytest.mark.xdist_group("shared_server")

        @pytest.mark.parametrize("number", range(8))
        def test_named(number):
            record(f"named-{number}")
    """,
    "test_browser.py": """
        pytestmark = pytest.mark.browser

        @pytest.mark.parametrize("number", range(8))
        def test_browser(number):
            record(f"browser-{number}")
    """,
    "test_stack_one.py": """
        @pytest.mark.multiprocess
        @pytest.mark.parametrize("number", range(4))
        def test_stack(number):
            record(f"stack-one-{number}")
    """,
    "test_stack_two.py": """
        pytestmark = pytest.mark.multiprocess

        @pytest.mark.parametrize("number", range(4))
        def test_stack(number):
            record(f"stack-two-{number}")
    """,
    "test_spread.py": """
        @pytest.mark.parametrize("number", range(16))
        def test_spread(number):
            record(f"spread-{number}")
    """,
}


def test_each_group_runs_on_one_worker_and_the_rest_in_no_group(tmp_path):
    suite = tmp_path / "suite"
    where_ran = tmp_path / "where-ran"
    suite.mkdir()
    where_ran.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    browser\n    multiprocess\n")
    for name, body in MODULES.items():
        (suite / name).write_text(textwrap.dedent(RECORD) + textwrap.dedent(body))
    environment = {
        name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider"]

    done = subprocess.run(
        [*command, "-p", "tests.xdist_groups", "-q", "-n", "2", "--dist", "loadgroup", str(suite)],
        cwd=suite,
        env={**environment, "WHERE_RAN": str(where_ran), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    ran = {path.name: path.read_text().split(" ", 1) for path in where_ran.iterdir()}
    workers = {name: worker for name, (worker, _node) in ran.items()}
    for group, names in {
        "named": [f"named-{number}" for number in range(8)],
        "browser module": [f"browser-{number}" for number in range(8)],
        "multi-process stack": [
            *(f"stack-one-{number}" for number in range(4)),
            *(f"stack-two-{number}" for number in range(4)),
        ],
    }.items():
        ran_on = {workers[name] for name in names}
        assert len(ran_on) == 1, f"the {group} group ran on {sorted(ran_on)}"
    # The rest is handed out test by test: in no group (which worker takes them depends on
    # the machine's load, so that is not checked).
    spread = [node for name, (_worker, node) in ran.items() if name.startswith("spread-")]
    assert len(spread) == 16
    assert not [node for node in spread if "@" in node]
