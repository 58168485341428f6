"""``manage.py memory_eval``: LoCoMo recall and golden-set scores, as a user runs them."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from memory_app.evaluation import evidence_fuse, locomo_date_parse
from memory_app.golden_eval import golden_matches
from memory_app.models import Memory
from sessions_app.models import SessionRecord
from tests.memory_app.support import lexical_only  # noqa: F401 (fixture)

GOLDEN = Path(__file__).resolve().parents[2] / "memory_app" / "golden" / "conversations.json"

LOCOMO_SLICE = [
    {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! How are you?"},
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "Just back from a pottery workshop with the kids, we made bowls.",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:3",
                    "text": "I joined an LGBTQ support group yesterday and it was powerful.",
                },
            ],
            "session_2_date_time": "7:55 pm on 9 June, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "I love camping at the beach with the kids.",
                    "blip_caption": "a photo of a tent on a sandy beach",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D2:2",
                    "text": "Researching adoption agencies now, it is a big step for me.",
                },
            ],
        },
        "qa": [
            {
                "question": "What did Melanie make at the pottery workshop?",
                "answer": "bowls",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "When did Caroline go to the LGBTQ support group?",
                "answer": "7 May",
                "evidence": ["D1:3"],
                "category": 2,
            },
            {
                "question": "Where did Melanie camp with the kids?",
                "answer": "beach",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "Would Caroline adopt?",
                "adversarial_answer": "no",
                "evidence": [],
                "category": 5,
            },
        ],
    }
]


def run_eval(*args):
    out = StringIO()
    call_command("memory_eval", *args, "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


@pytest.fixture
def offline(settings):
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = False


pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offline", "lexical_only")]


def test_locomo_reports_recall_and_latency_over_the_scored_questions(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SLICE))

    result = run_eval("locomo", str(path), "--k", "1", "5")

    assert result["questions"] == 3
    # Memories are facts about the person: the pottery turn states none, so its question is
    # not answered from memories; past conversations, the other source, find the turn.
    memories = result["by_source"]["memories"]
    assert (memories["recall@1"], memories["recall@5"]) == (0.6667, 0.6667)
    assert memories["recall_by_category"]["recall@5"] == {"temporal": 1.0, "single-hop": 0.5}
    assert (result["recall@1"], result["recall@5"]) == (1.0, 1.0)
    assert 0 < result["search_ms_p50"] <= result["search_ms_p95"]
    assert (result["extraction"], result["embedder"]) == ("offline", "none")


def test_locomo_deletes_its_users_unless_kept(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SLICE))

    run_eval("locomo", str(path))
    assert not get_user_model().objects.filter(username__startswith="locomo-eval-").exists()

    run_eval("locomo", str(path), "--keep")
    user = get_user_model().objects.get(username__startswith="locomo-eval-conv-test-")
    assert SessionRecord.objects.filter(user=user, app_name="locomo-eval").count() == 2
    texts = set(Memory.objects.filter(user=user).values_list("text", flat=True))
    assert texts == {
        "The user joined an LGBTQ support group yesterday and it was powerful.",
        "The user loves camping at the beach with the kids.",
    }


def test_golden_scores_precision_recall_and_f1_with_what_was_missed(tmp_path):
    conversations = json.loads(GOLDEN.read_text())
    by_id = {c["id"]: c for c in conversations}
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([by_id["correction-city"], by_id["bug-fixed"]]))

    result = run_eval("golden", str(path))

    assert (result["expected"], result["kept"], result["matched"]) == (3, 1, 1)
    assert (result["precision"], result["recall"], result["f1"]) == (1.0, 0.3333, 0.5)
    assert result["details"][1]["missing"] == [  # a deploy's troubles: not about the person
        "The user's deploy failed because a database migration timed out.",
        "A longer lock timeout fixed the user's migration and the release went out.",
    ]
    assert not get_user_model().objects.filter(username__startswith="golden-eval-").exists()


def test_golden_scores_each_topic_when_the_expected_memories_name_one(tmp_path):
    """The second-wave set (issue 13) names each expected memory's topic."""
    wave2 = json.loads((GOLDEN.parent / "conversations_wave2.json").read_text())
    assert len(wave2) >= 30 and all("topic" in e for c in wave2 for e in c["expected"])
    by_id = {c["id"]: c for c in wave2}
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([by_id["music-taste"], by_id["correction-age"]]))

    result = run_eval("golden", str(path))

    preferences = result["by_topic"]["preferences"]
    assert (preferences["expected"], preferences["recall"]) == (2, 1.0)
    personal = result["by_topic"]["personal_info"]
    assert (personal["expected"], personal["recall"]) == (1, 0.0)  # "wait, no, I turned 35"
    assert result["details"][1]["missing"] == ["The user is 35 years old."]


def test_greetings_and_small_talk_in_the_golden_set_leave_no_memory():
    """The small-talk set: chats that open, thank or take leave, some with a fact between."""
    result = run_eval("golden", str(GOLDEN.parent / "conversations_small_talk.json"))

    assert [d["unexpected"] for d in result["details"]] == [[]] * result["conversations"]
    assert (result["precision"], result["recall"]) == (1.0, 0.75)


def test_golden_matching_is_one_to_one_on_the_expected_terms():
    kept = ["The user lives in Porto with two cats.", "The user likes tea."]
    expected = ["The user lives in Porto.", "The user lives in Porto.", "The user likes coffee."]

    assert golden_matches(kept=kept, expected=expected) == [(0, 0)]


def test_locomo_dates_parse_as_utc():
    assert locomo_date_parse(text="1:56 pm on 8 May, 2023").isoformat() == (
        "2023-05-08T13:56:00+00:00"
    )


def test_golden_chats_said_with_creation_off_or_in_a_temporary_chat_leave_nothing(tmp_path):
    """The Memory page's set (issue 26): several chats of one user, some said with creation
    off or in a temporary chat, then generated with creation back on."""
    page_set = json.loads((GOLDEN.parent / "conversations_memory_page.json").read_text())
    assert len(page_set) >= 40
    by_id = {c["id"]: c for c in page_set}
    path = tmp_path / "golden.json"
    chosen = ["miso-off-then-on", "temporary-chat", "lisbon-to-porto", "photosynthesis-haiku"]
    path.write_text(json.dumps([by_id[name] for name in chosen]))

    result = run_eval("golden", str(path))

    assert [d["unexpected"] for d in result["details"]] == [[]] * 4
    assert (result["precision"], result["recall"]) == (1.0, 1.0)


def test_locomo_reports_memories_past_conversations_and_both(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SLICE))

    result = run_eval("locomo", str(path), "--k", "1", "5")

    assert result["sources"] == ["both", "memories", "past"]
    assert set(result["by_source"]) == {"both", "memories", "past"}
    assert result["recall@5"] == result["by_source"]["both"]["recall@5"]
    assert result["by_source"]["past"]["recall@5"] == 1.0
    assert result["by_source"]["memories"]["recall_by_category"]["recall@5"]


def test_both_lists_the_past_turns_first_then_turns_only_memories_hold():
    past = [(1.5, {"D1:1"}), (1.4, {"D1:2"}), (1.3, {"D1:3"}), (1.2, {"D1:4"})]
    memories = [(1.6, {"D1:3"}), (1.5, {"D9:9", "D1:1"}), (0.5, {"D1:4"}), (1.3, {None})]

    fused = evidence_fuse(memories=memories, past=past)

    # The past turns keep their order, whatever the memories match: a memory made from one
    # of them adds nothing; a turn only a memory holds comes after them, each turn once.
    assert fused == [{"D1:1"}, {"D1:2"}, {"D1:3"}, {"D1:4"}, {"D9:9"}]


def test_locomo_past_conversations_alone_generates_no_memory(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SLICE))

    result = run_eval("locomo", str(path), "--sources", "past", "--keep")

    assert (result["sources"], result["memories"], result["recall@5"]) == (["past"], 0, 1.0)
    assert not Memory.objects.exists()


def test_the_corrections_set_counts_exact_conversations_per_phrasing_family(tmp_path):
    """The corrections set (issue 45): each conversation names its phrasing family and the
    older values it corrected; it is exact when the newest is active and no older one is."""
    corrections = json.loads((GOLDEN.parent / "conversations_corrections.json").read_text())
    assert len(corrections) >= 60 and all(c["family"] and c["stale"] for c in corrections)
    by_id = {c["id"]: c for c in corrections}
    quit_nursing = by_id["quit-nursing-teacher"]
    never_corrected = {**quit_nursing, "id": "never-corrected", "family": "control"}
    never_corrected["sessions"] = quit_nursing["sessions"][:1]
    never_corrected["expected"] = ["The user is a teacher now."]
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([by_id["wroclaw-quick-update"], quit_nursing, never_corrected]))

    result = run_eval("golden", str(path))

    assert result["exact"] == 2
    assert result["by_family"]["control"] == {"conversations": 1, "exact": 0, "rate": 0.0}
    assert result["by_family"]["mid-sentence"]["rate"] == 1.0
    assert result["details"][2]["stale"] == ["The user works as a nurse."]


def test_locomo_searches_the_turns_with_the_vectors_the_background_gives_them(
    tmp_path, fake_openai, settings
):
    """With an embedder, each chat's turns are embedded before the questions, as the
    background embeds a person's turns seconds after they are said: searched without their
    vectors, an embedder's figures would be the lexical ones."""
    from memory_app.embedding import embedder_get
    from memory_app.models import TurnVector

    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = "nomic-embed-text"
    embedder_get.cache_clear()
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SLICE))

    try:
        result = run_eval("locomo", str(path), "--sources", "past", "--keep")
        embedder = embedder_get().name
    finally:
        embedder_get.cache_clear()

    assert result["embedder"] == embedder
    turns = sum(
        len(turns) for key, turns in LOCOMO_SLICE[0]["conversation"].items() if key[-1].isdigit()
    )
    assert TurnVector.objects.filter(embedding_model=embedder).count() == turns
