"""A real server for a client in another environment: ``python -m tests.multiprocess.serve``.

The ADK client's suite (clients/python/tests, run by ``make test-adk``) runs in
google-adk's own virtual environment, which cannot import this project; it
starts this module with the project's interpreter to get a real server:
PostgreSQL and Redis of their own, migrated, one daphne and a Celery worker
(``tests.multiprocess.stack``). The first line on stdout is
``{"base_url": ...}``; then each JSON line on stdin is a command answered by one
JSON line ``{"result": ...}`` (or ``{"error": ...}``):

- ``{"op": "app_key_create", "app": NAME, "scopes": [...]?}``: an API key, made as
  a script makes one (``manage.py app_key_create``);
- ``{"op": "rows_holding", "text": TEXT}``: ``{table: rows}`` for every table with
  rows whose text holds TEXT (what "nothing is left" is checked against);
- ``{"op": "person_create", "app": NAME?, "user_id": ID?}``: a person who signed up
  through the form (``username``, ``password``, the browser's ``cookies``) with a
  read-write personal access token (``token``, made by ``manage.py token_create``); with
  ``app`` and ``user_id``, also that app's end user ``user_id``, linked as staff link a
  site's own users (the person's account is the end user's);
- ``{"op": "logs"}``: the last lines of every process's log.

End of input stops everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from psycopg import sql

from tests.multiprocess.stack import BIN, PASSWORD, ROOT, Browser, Stack, running_stack


def app_key_create(stack: Stack, *, app: str, scopes: list[str] | None = None) -> str:
    arguments = ["--app", app, *(["--scopes", *scopes] if scopes else [])]
    completed = subprocess.run(
        [str(BIN / "python"), str(ROOT / "manage.py"), "app_key_create", *arguments],
        env=stack.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"app_key_create failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout.strip().splitlines()[-1].strip()


def _manage(stack: Stack, *arguments: str) -> str:
    completed = subprocess.run(
        [str(BIN / "python"), str(ROOT / "manage.py"), *arguments],
        env=stack.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{arguments[0]} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


def person_create(stack: Stack, *, app: str | None = None, user_id: str | None = None) -> dict:
    browser = Browser(stack.web_a.base_url).sign_up()
    if app is not None:
        linked = stack.postgres.rows(
            "INSERT INTO agents_app_enduser (app_id, external_id, user_id, created_at) "
            "SELECT app.id, %s, account.id, now() FROM agents_app_app AS app, auth_user AS "
            "account WHERE app.name = %s AND account.username = %s RETURNING id",
            user_id,
            app,
            browser.username,
        )
        if len(linked) != 1:
            raise RuntimeError(f"no app named {app!r} to link {user_id!r} in")
    output = _manage(stack, "token_create", "--user", browser.username, "--scopes", "read", "write")
    return {
        "username": browser.username,
        "password": PASSWORD,
        "cookies": {cookie.name: cookie.value for cookie in browser.cookies},
        "token": output.strip().splitlines()[-1].strip(),
    }


def rows_holding(stack: Stack, *, text: str) -> dict[str, int]:
    """Rows of every table of the database whose text form holds ``text`` (any column)."""
    tables = [
        row[0]
        for row in stack.postgres.rows(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
    ]
    found = {}
    with stack.postgres.connect() as connection:
        for table in tables:
            query = sql.SQL("SELECT count(*) FROM {table} AS t WHERE t::text LIKE %s").format(
                table=sql.Identifier(table)
            )
            count = connection.execute(query, (f"%{text}%",)).fetchone()[0]
            if count:
                found[table] = count
    return found


def _answer(stack: Stack, command: dict[str, Any]) -> Any:
    operation = command.pop("op")
    if operation == "app_key_create":
        return app_key_create(stack, **command)
    if operation == "rows_holding":
        return rows_holding(stack, **command)
    if operation == "person_create":
        return person_create(stack, **command)
    if operation == "logs":
        return stack.logs()
    raise ValueError(f"unknown op {operation!r}")


def main() -> None:
    with running_stack(second_web=False, beat=False) as stack:
        print(json.dumps({"base_url": stack.web_a.base_url}), flush=True)
        for line in sys.stdin:
            try:
                reply = {"result": _answer(stack, json.loads(line))}
            except Exception as error:
                reply = {"error": f"{type(error).__name__}: {error}"}
            print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
