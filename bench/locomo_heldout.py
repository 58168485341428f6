"""The LoCoMo held-out split: the conversations of the public ``data/locomo10.json`` that are not
in the dev split, written unchanged, for a check never tuned on.

    python -m bench.locomo_heldout PATH/TO/locomo10.json \
        [--dev /work/shared/data/locomo/locomo_dev.json] [--out build/locomo_heldout.json]

``locomo10.json`` is the LoCoMo repository's (snap-research/LoCoMo, CC BY-NC 4.0); it is not
committed here, nor is the split it makes. Each dev conversation must be in it unchanged (the
same file, so the two splits are the two halves of one release); the held-out split keeps the
others in their order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEV = Path("/work/shared/data/locomo/locomo_dev.json")
OUT = Path("build/locomo_heldout.json")


def heldout_split(*, full: list[dict], dev: list[dict]) -> list[dict]:
    """The conversations of ``full`` whose ``sample_id`` no dev conversation has; raises
    ValueError when a dev conversation is missing from ``full`` or differs from it."""
    by_id = {sample["sample_id"]: sample for sample in full}
    for sample in dev:
        if by_id.get(sample["sample_id"]) != sample:
            raise ValueError(f"{sample['sample_id']} of the dev split is not in the release as is")
    dev_ids = {sample["sample_id"] for sample in dev}
    return [sample for sample in full if sample["sample_id"] not in dev_ids]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full", type=Path, help="LoCoMo's data/locomo10.json")
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    heldout = heldout_split(
        full=json.loads(args.full.read_text()), dev=json.loads(args.dev.read_text())
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(heldout))
    ids = ", ".join(sample["sample_id"] for sample in heldout)
    print(f"{args.out}: {len(heldout)} conversations ({ids})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
