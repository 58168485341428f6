"""bench.chat_vs_adk's settings and arithmetic: what a run compares, and that both sides' models
stream alike. The run itself (servers, load) is the benchmark's, never the suite's."""

from __future__ import annotations

import pytest

from bench.chat_vs_adk.__main__ import arguments_parse, offline_chunks, ratios
from bench.chat_vs_adk.adk_server import scripted_pieces


def test_a_run_compares_every_side_at_each_concurrency_of_the_plot_by_default():
    args = arguments_parse([])

    assert args.turns == [10, 50, 100, 200]
    assert args.processes == [1, 2]
    assert args.sides == ["ours", "adk", "adk-tuned"]
    assert args.connections >= max(args.turns)


@pytest.mark.parametrize(
    "argv",
    [
        ["--connections", "50", "--turns", "100"],
        ["--sides", "ours,adk-fast"],
        ["--turns", "0"],
        ["--database", "same", "--adk-database", "same"],
    ],
)
def test_settings_that_cannot_run_are_refused(argv):
    with pytest.raises(SystemExit):
        arguments_parse(argv)


def test_the_scripted_adk_model_streams_as_many_chunks_as_the_offline_model():
    message = arguments_parse([]).message.format(n=17)
    reply = f"You said: \u201c{message}\u201d"

    pieces = scripted_pieces(reply, offline_chunks(message))

    assert "".join(pieces) == reply
    assert len(pieces) == offline_chunks(message) > 1


def round_row(side, repeat, first, turn, cpu):
    return {
        "side": side,
        "processes": 2,
        "turns": 100,
        "repeat": repeat,
        "first_token_ms": {"p50": first},
        "turn_ms": {"p50": turn},
        "server_cpu_per_turn_ms": cpu,
    }


def test_each_adk_round_is_set_against_ours_of_the_same_setting_and_run():
    rows = [
        round_row("ours", 0, 100.0, 400.0, 5.0),
        round_row("adk", 0, 300.0, 800.0, 20.0),
        round_row("ours", 1, 200.0, 500.0, 10.0),
        round_row("adk-tuned", 1, 300.0, 600.0, 15.0),
    ]

    assert [
        (r["side"], r["repeat"], r["first_token_p50"], r["turn_p50"], r["server_cpu_per_turn"])
        for r in ratios(rows)
    ] == [("adk", 0, 3.0, 2.0, 4.0), ("adk-tuned", 1, 1.5, 1.2, 1.5)]
