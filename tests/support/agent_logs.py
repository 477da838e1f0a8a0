"""The agents' sample logs as one tree, the way the tests read them, and a copy of one log.

Each tool's samples (`Tool.samples`, kept in its folder `ingest_app/importers/<tool>/samples/`) sit under
`<tree>/<tool's folder name>/` (`claude_code/.claude/…`), beside the logs that are no tool's samples
(tests/data/agent_logs/: the seed's example, files of no tool). The tree is a copy (modification times kept) made
once per test process: a test may import it in place as a machine's home, and its links would be left out of an
import (links out of the folder imported are skipped).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from ingest_app.importers.registry import TOOLS

OWN = Path(__file__).resolve().parents[1] / "data" / "agent_logs"


def _tree() -> Path:
    root = Path(tempfile.mkdtemp(prefix="ace-agent-logs-")) / "agent_logs"
    atexit.register(shutil.rmtree, root.parent, True)
    shutil.copytree(OWN, root)
    for tool in TOOLS:
        shutil.copytree(tool.samples, root / tool.samples.parent.name)
    return root


DATA = _tree()


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
