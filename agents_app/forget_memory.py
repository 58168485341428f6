"""The agent's ``forget_memory`` tool (memory as a tool, beside ``create_memory``): the person
says "forget that ...", "don't remember ...", "delete what you know about my ..." and the
memories of theirs it names go, as they would from the Memory page
(:func:`memory_app.services.memories_forget_requested`).

The tool acts for the person of the chat only (``ToolContext.user_id``): nothing in the
arguments can name another person, and ids of memories not theirs are ignored.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.runtime.tools import Tool, ToolContext, response_failed
from memory_app import services
from sessions_app.selectors import user_pk_from_id

FORGET_MEMORY_MAX_CHARS = 500
FORGET_CHOICES_SHOWN = 5


async def _forget_memory(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    about = args.get("about", "")
    everything = args.get("all", False)
    memory_ids = args.get("memory_ids", [])
    if not isinstance(about, str) or len(about) > FORGET_MEMORY_MAX_CHARS:
        return {
            "status": "error",
            "message": f"about must be text of at most {FORGET_MEMORY_MAX_CHARS} characters",
        }
    if not isinstance(everything, bool) or not isinstance(memory_ids, list):
        return {"status": "error", "message": "all must be a boolean, memory_ids a list"}
    if not about.strip() and not memory_ids:
        return {"status": "error", "message": "say what to forget"}
    user_pk = user_pk_from_id(context.user_id)
    if user_pk is None:
        return {"status": "ok", "forgotten": []}
    report = await sync_to_async(services.memories_forget_requested)(
        app_name=context.app_name,
        user_pk=user_pk,
        about=about.strip(),
        everything=everything,
        memory_ids=[str(each) for each in memory_ids][: FORGET_CHOICES_SHOWN * 4],
    )
    if report.choices:
        return {
            "status": "ambiguous",
            "message": "Several memories match: ask the user which one to forget.",
            "choices": [
                {"id": memory_id, "text": text}
                for memory_id, text in report.choices[:FORGET_CHOICES_SHOWN]
            ],
        }
    return {"status": "ok", "forgotten": report.forgotten}


def _forget_memory_step(args: dict[str, Any], response: dict[str, Any] | None) -> str:
    if response is None:
        return "Forgetting"
    if response_failed(response):
        return "Couldn't forget that"
    forgotten = len(response.get("forgotten") or [])
    if response.get("status") == "ambiguous":
        return "Found several memories that match"
    if not forgotten:
        return "Found nothing to forget"
    return f"Forgot {forgotten} {'memory' if forgotten == 1 else 'memories'}"


FORGET_MEMORY_TOOL = Tool(
    declaration=types.FunctionDeclaration(
        name="forget_memory",
        description=(
            "Forget what you remember about the user when they ask you to ('forget that ...', "
            "'don't remember ...', 'delete what you know about my ...'). Give their words for "
            "what to forget; set all when they ask to forget everything about it. When several "
            "memories match, nothing is forgotten and you get them as choices: ask the user "
            "which, then call again with the chosen memory_ids. Tell the user what was "
            "forgotten."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {
                "about": {
                    "type": "string",
                    "description": "What to forget, in the user's words ('my sister lives in "
                    "Braga').",
                },
                "all": {
                    "type": "boolean",
                    "description": "True to forget every matching memory at once.",
                },
                "memory_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The ids of the choices the user picked.",
                },
            },
        },
    ),
    function=_forget_memory,
    describe=_forget_memory_step,
)
