"""The configuration page's table, made from chatapp/settings.py at every build of the site.

Each environment variable settings.py reads through django-environ (`env.str("NAME", ...)`,
`env.int`, `env.bool`, ...) is a row, in the order settings.py reads them. A constant default
is read from settings.py itself; docs/configuration.yml gives each variable its description,
and the default in words where settings.py computes it (`default=PRODUCTION`). A variable
without a description, a description of a variable settings.py does not read, or a default in
words where settings.py has a constant one stops the build with a message saying which.
"""

from __future__ import annotations

import ast
import operator
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "chatapp" / "settings.py"
DESCRIPTIONS = ROOT / "docs" / "configuration.yml"
PAGE = "configuration.md"
MARKER = "<!-- settings table -->"

_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


class ComputedDefault(ValueError):
    """The default is an expression of other settings, not a constant."""


class Variable(NamedTuple):
    name: str
    default: ast.expr | None


def variables_read(settings_path: Path = SETTINGS) -> list[Variable]:
    """Every `env.<kind>("NAME", default=...)` call of settings.py, in source order."""
    found = []
    for node in ast.walk(ast.parse(settings_path.read_text())):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "env"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        default = keywords.get("default", node.args[1] if len(node.args) > 1 else None)
        found.append(((node.lineno, node.col_offset), Variable(node.args[0].value, default)))
    return [variable for _, variable in sorted(found, key=lambda pair: pair[0])]


def constant_default(node: ast.expr | None) -> object:
    """The default's value when settings.py writes it as a constant (sums and products of
    numbers included: `30 * 24 * 3600`); ComputedDefault when it depends on anything else."""
    if node is None:
        raise ComputedDefault("no default")
    try:
        return _constant(node)
    except (ValueError, TypeError) as error:
        raise ComputedDefault(ast.unparse(node)) from error


def _constant(node: ast.expr) -> object:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_constant(node.left), _constant(node.right))
    return ast.literal_eval(node)


def _shown(value: object) -> str:
    """A default as the environment would spell it: `false`, `3`, `a,b`, or "empty"."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if value in ("", [], ()):
        return "empty"
    if isinstance(value, list | tuple):
        return "`" + ",".join(str(item) for item in value) + "`"
    return f"`{value}`"


def settings_rows(
    settings_path: Path = SETTINGS, descriptions_path: Path = DESCRIPTIONS
) -> list[tuple[str, str, str]]:
    """(name, default, description) for every variable settings.py reads, in its order.

    Raises ValueError naming every variable whose description is missing, stale, or gives a
    default in words where settings.py states a constant (or none where it computes one)."""
    described = yaml.safe_load(descriptions_path.read_text()) or {}
    read = variables_read(settings_path)
    problems = []
    rows = []
    for variable in read:
        entry = described.get(variable.name)
        if not entry or not entry.get("description"):
            problems.append(f"{variable.name}: read by settings.py, no description")
            continue
        try:
            default = _shown(constant_default(variable.default))
            if "default" in entry:
                problems.append(
                    f"{variable.name}: settings.py's default is {default}; "
                    "leave `default` out of its description"
                )
        except ComputedDefault as computed:
            if "default" not in entry:
                problems.append(
                    f"{variable.name}: settings.py computes the default ({computed}); "
                    "say it in words with `default`"
                )
            default = entry.get("default", "")
        rows.append((variable.name, default, " ".join(entry["description"].split())))
    problems += [
        f"{name}: described, but settings.py does not read it"
        for name in sorted(set(described) - {variable.name for variable in read})
    ]
    if problems:
        raise ValueError(f"{descriptions_path.name}:\n" + "\n".join(problems))
    return rows


def settings_table() -> str:
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in settings_rows()]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """MkDocs hook: the configuration page gets the table where its marker stands.

    MkDocs is imported here only, so the suite reads the table in an environment without it
    (the local-embeddings one)."""
    from mkdocs.exceptions import PluginError

    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} lost its marker {MARKER}")
    try:
        return markdown.replace(MARKER, settings_table())
    except ValueError as problems:
        raise PluginError(str(problems)) from problems
