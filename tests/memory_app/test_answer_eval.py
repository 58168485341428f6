"""``memory_eval locomo --answer-model --judge-model``: J against the fake Gemini server on one
small conversation (its figures are printed by the command; here only their making is checked)."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from memory_app.answer_eval import judge_label
from memory_app.models import Memory
from tests.fake_gemini import Reply, final_chunk, text_chunk
from tests.memory_app.support import lexical_only  # noqa: F401 (fixture)

pytestmark = [pytest.mark.usefixtures("lexical_only"), pytest.mark.django_db(transaction=True)]

CONVERSATION = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:1",
                    "text": "I joined a pottery class yesterday and made a blue bowl.",
                },
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Lovely! I run every morning."},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "I finished my first marathon in Boston last Sunday.",
                }
            ],
        },
        "qa": [
            {
                "question": "What did Caroline make at the pottery class?",
                "answer": "a blue bowl",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "When did Melanie finish her first marathon?",
                "answer": "The Sunday before 20 June 2023",
                "evidence": ["D2:1"],
                "category": 2,
            },
            {"question": "Adversarial?", "adversarial_answer": "x", "evidence": [], "category": 5},
        ],
    }
]


@pytest.fixture
def locomo_file(tmp_path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(CONVERSATION))
    return path


def reply(text, *, prompt_tokens=100, output_tokens=5):
    return Reply(
        [text_chunk(text), final_chunk(prompt_tokens=prompt_tokens, output_tokens=output_tokens)]
    )


def run(*args):
    out = StringIO()
    call_command("memory_eval", *args, "--json", verbosity=0, stdout=out)
    return json.loads(out.getvalue())


def test_each_answer_is_judged_and_j_is_reported_with_tokens(locomo_file, fake_gemini):
    fake_gemini.push(
        reply("A blue bowl.", prompt_tokens=120, output_tokens=4),
        reply('{"label": "CORRECT"}', prompt_tokens=60, output_tokens=6),
        reply("In May 2023.", prompt_tokens=140, output_tokens=6),
        reply('{"label": "WRONG"}', prompt_tokens=62, output_tokens=6),
    )

    result = run(
        "locomo",
        str(locomo_file),
        "--answer-model",
        "answerer-1",
        "--judge-model",
        "judge-1",
        "--memory-model",
        "offline",
    )

    assert result["questions"] == 2 and result["context"] == "top 10 memories"
    assert result["j_score"] == 0.5
    assert result["j_by_category"] == {"temporal": 0.0, "single-hop": 1.0}
    assert result["tokens"] == {
        "answer_prompt_mean": 130.0,
        "answer_output_mean": 5.0,
        "answer_total": 270,
        "judge_total": 134,
    }
    first = result["answers"][0]
    assert (first["answer"], first["label"], first["prompt_tokens"]) == (
        "A blue bowl.",
        "CORRECT",
        120,
    )
    answer_request, judge_request = fake_gemini.requests[0], fake_gemini.requests[1]
    assert answer_request.model == "answerer-1" and judge_request.model == "judge-1"
    assert "Caroline and Melanie" in answer_request.system_text()
    prompt = json.dumps(answer_request.body["contents"])
    assert "(Caroline) The user joined a pottery class yesterday and made a blue bowl." in prompt
    assert "Question: What did Caroline make at the pottery class?" in prompt
    judged = json.dumps(judge_request.body["contents"])
    assert "Gold answer: a blue bowl" in judged and "Answer: A blue bowl." in judged
    assert not Memory.objects.exists(), "the run's users and memories are deleted"


def test_full_context_answers_from_the_whole_conversation(locomo_file, fake_gemini):
    fake_gemini.push(
        reply("a blue bowl"),
        reply("CORRECT"),
        reply("18 June 2023"),
        reply("The answer is CORRECT."),
    )

    result = run(
        "locomo",
        str(locomo_file),
        "--answer-model",
        "m",
        "--judge-model",
        "m",
        "--full-context",
    )

    assert result["j_score"] == 1.0 and result["context"] == "full conversation"
    prompt = json.dumps(fake_gemini.requests[0].body["contents"])
    assert "Session 2 (20 June 2023):" in prompt
    assert "Melanie: I finished my first marathon in Boston last Sunday." in prompt


def test_without_a_key_the_command_says_so_and_exits_2(locomo_file):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
    }
    command = [sys.executable, "manage.py", "memory_eval", "locomo", str(locomo_file)]
    done = subprocess.run(
        [*command, "--answer-model", "m", "--judge-model", "m", "--json"],
        cwd=settings.BASE_DIR,
        env={**env, "GEMINI_API_KEY": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2
    assert "set GEMINI_API_KEY" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ('{"label": "CORRECT"}', "CORRECT"),
        ('{"label": "WRONG"}', "WRONG"),
        ("correct", "CORRECT"),
        ("I cannot tell", "WRONG"),
    ],
)
def test_the_judge_s_label_is_read_from_json_or_words(text, label):
    assert judge_label(text) == label
