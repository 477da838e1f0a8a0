"""The agents' sample logs as one tree, the way the tests read them: each tool's samples (`Tool.samples`, kept in
its folder `ingest_app/importers/<tool>/samples/`) under `<tree>/<tool's folder name>/` (`claude_code/.claude/…`),
beside the logs that are no tool's samples (tests/data/agent_logs/: the seed's example, files of no tool).

The tree is a copy (modification times kept) made once per test process: a test may import it in place as a
machine's home, and its links would be left out of an import (links out of the folder imported are skipped).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from ingest_app.importers.registry import TOOLS

OWN = Path(__file__).resolve().parent / "data" / "agent_logs"


def _tree() -> Path:
    root = Path(tempfile.mkdtemp(prefix="ace-agent-logs-")) / "agent_logs"
    atexit.register(shutil.rmtree, root.parent, True)
    shutil.copytree(OWN, root)
    for tool in TOOLS:
        shutil.copytree(tool.samples, root / tool.samples.parent.name)
    return root


DATA = _tree()
