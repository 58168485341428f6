"""bench.locomo_heldout: the held-out LoCoMo split is the release less the dev split."""

import json

import pytest

from bench.locomo_heldout import heldout_split, main


def _sample(sample_id: str, text: str = "hi") -> dict:
    return {"sample_id": sample_id, "conversation": {"session_1": [{"text": text}]}, "qa": []}


def test_the_heldout_split_is_every_conversation_the_dev_split_lacks(tmp_path):
    full = [_sample("conv-1"), _sample("conv-2"), _sample("conv-3")]
    (tmp_path / "full.json").write_text(json.dumps(full))
    (tmp_path / "dev.json").write_text(json.dumps([_sample("conv-2")]))
    out = tmp_path / "out" / "heldout.json"

    main([str(tmp_path / "full.json"), "--dev", str(tmp_path / "dev.json"), "--out", str(out)])

    assert [sample["sample_id"] for sample in json.loads(out.read_text())] == ["conv-1", "conv-3"]


@pytest.mark.parametrize("dev", [[_sample("conv-9")], [_sample("conv-1", text="changed")]])
def test_a_dev_conversation_missing_or_changed_in_the_release_is_refused(dev):
    with pytest.raises(ValueError, match="not in the release as is"):
        heldout_split(full=[_sample("conv-1")], dev=dev)
