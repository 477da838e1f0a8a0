"""The agent logs of tests/data/agent_logs/ (the tools' real record shapes), as the import tests use them."""

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "agent_logs"


def copy_log(relative: Path, root: Path, upto: int | None = None) -> Path:
    """The log under root at the same relative path (its storage layout kept, and its .meta.json beside it if it
    has one), optionally cut at a byte."""
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    data = (DATA / relative).read_bytes()
    target.write_bytes(data if upto is None else data[:upto])
    meta = (DATA / relative).with_name((DATA / relative).name.removesuffix(".jsonl") + ".meta.json")
    if meta.exists():
        shutil.copy(meta, target.with_name(meta.name))
    return target
