#!/usr/bin/env python
"""Throughput of the built-in `rules` extractor and of the message scorer, on one core, no database.

    .venv/bin/python bench/rules_speed.py                 # 20,000 messages, 3 rounds
    .venv/bin/python bench/rules_speed.py --messages 100000 --rounds 5
    .venv/bin/python bench/rules_speed.py --memorable 1.0   # every message holds something to remember

Corpus: English and Chinese messages of 100–500 characters, generated with a fixed seed. 80% are chit-chat:
agent work talk (bench/benchlib.py's prose), small talk and acknowledgements; 20% (--memorable) carry one
memorable statement (a preference, a name, a budget, "remember that...", task progress, an event...) inside
the same kind of prose. Roles: 70% user, 30% assistant. `extract()` gets batches of --batch messages, as a
strategy run does, once per strategy type; `score()` gets every message. The best of --rounds is reported
(messages/s on one core). Figures go in docs/rules-extractor.md; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

from benchlib import machine, print_table, prose, write_results  # noqa: E402

from strategies_app.extractors.base import ExtractionContext, SourceMessage  # noqa: E402
from strategies_app.extractors.rules import RulesExtractor, score  # noqa: E402

SMALL_TALK = [
    "ok thanks",
    "Sounds good, go ahead.",
    "Hi! How are you today?",
    "Can you explain that again in simpler words?",
    "That makes sense, thank you for the detailed answer.",
    "What do you think about the weather this weekend?",
    "Do you like this approach better than the previous one?",
    "好的，谢谢",
    "你好，今天过得怎么样？",
    "可以再解释一下吗？我没太看懂。",
    "这个方案看起来不错，我们继续吧。",
    "你觉得哪个更好一些？",
]
MEMORABLE_EN = [
    "I prefer {adj} lighting in the evening.",
    "I really like {food}, but I can't stand {food2}.",
    "My name is {name} and I live in {city}.",
    "My budget is ${amount} for the whole trip.",
    "Remember that my passport expires in {month}.",
    "I'm allergic to {food2}.",
    "My daughter is called {name}.",
    "The router is installed and the network is configured. Progress: {pct}%.",
    "Next step: pair the {device} with the hub.",
    "I went to {city} last week with my family.",
    "Lesson learned: always back up the config before upgrading the firmware.",
    "I usually go to bed around 11 and wake up at 7.",
]
MEMORABLE_ZH = [
    "我更喜欢{adj_zh}的灯光。",
    "我喜欢{food_zh}，但是不喜欢{food2_zh}。",
    "我叫{name_zh}，住在{city_zh}。",
    "预算{amount}元左右。",
    "记住，我的护照{month_zh}到期。",
    "我对{food2_zh}过敏。",
    "我女儿叫{name_zh}。",
    "路由器已经装好了，网络配置完成了，进度{pct}%。",
    "下一步配对{device_zh}。",
    "我上周去了{city_zh}。",
    "教训是升级固件之前一定要先备份配置。",
    "我习惯晚上十一点睡觉。",
]
VALUES = {
    "adj": ["soft", "warm", "bright", "dim"],
    "food": ["spicy food", "sushi", "dark chocolate", "green tea"],
    "food2": ["cilantro", "peanuts", "shellfish", "olives"],
    "name": ["Anna", "Tom", "Lily", "Max"],
    "city": ["Berlin", "Hangzhou", "Lisbon", "Kyoto"],
    "amount": ["500", "1200", "3000", "5000"],
    "month": ["May", "June", "October"],
    "pct": ["40", "60", "80"],
    "device": ["lights", "thermostat", "speaker"],
    "adj_zh": ["柔和", "明亮", "温暖"],
    "food_zh": ["吃辣", "火锅", "绿茶"],
    "food2_zh": ["香菜", "花生", "海鲜"],
    "name_zh": ["小明", "小雨", "王芳"],
    "city_zh": ["杭州", "上海", "成都"],
    "month_zh": ["五月", "六月", "十月"],
    "device_zh": ["灯光", "温控器", "音箱"],
}


def fill(template: str, rng: random.Random) -> str:
    return template.format(**{key: rng.choice(options) for key, options in VALUES.items()})


def message_text(rng: random.Random, memorable: float) -> str:
    """One message of roughly 100–500 characters, with a memorable statement inside at the given rate."""
    zh = rng.random() < 0.4
    if rng.random() < memorable:
        statement = fill(rng.choice(MEMORABLE_ZH if zh else MEMORABLE_EN), rng)
        before = prose(rng, 40, 200) if rng.random() < 0.7 else ""
        after = prose(rng, 40, 200) if rng.random() < 0.5 else ""
        return " ".join(part for part in (before, statement, after) if part)
    if rng.random() < 0.25:
        return rng.choice(SMALL_TALK)
    return prose(rng, 100, 500)


def corpus(count: int, seed: int, memorable: float = 0.2) -> list[SourceMessage]:
    rng = random.Random(seed)
    return [
        SourceMessage(
            id=f"m{i}",
            seq=i + 1,
            role="user" if rng.random() < 0.7 else "assistant",
            content=message_text(rng, memorable),
        )
        for i in range(count)
    ]


def best_of(rounds: int, run) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=20, help="messages per extract() call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--memorable", type=float, default=0.2, help="share of messages with a memorable statement")
    args = parser.parse_args()

    messages = corpus(args.messages, args.seed, args.memorable)
    batches = [messages[i : i + args.batch] for i in range(0, len(messages), args.batch)]
    extractor = RulesExtractor()
    mean_chars = sum(len(m.content) for m in messages) / len(messages)
    print(
        f"{len(messages)} messages, mean {mean_chars:.0f} characters, {args.memorable:.0%} memorable, "
        f"batches of {args.batch}"
    )

    rows, results = [], {}
    elapsed = best_of(args.rounds, lambda: [score(m.content, m.role) for m in messages])
    results["score"] = {"messages_per_second": round(len(messages) / elapsed)}
    rows.append(["score()", "", f"{len(messages) / elapsed:,.0f}", f"{elapsed / len(messages) * 1e6:.1f}"])

    for strategy_type in ("profile", "task", "fact"):
        found = []

        def run(strategy_type=strategy_type, found=found):
            found.clear()
            for index, batch in enumerate(batches):
                extraction = extractor.extract(
                    ExtractionContext(
                        strategy_type=strategy_type,
                        prompt="",
                        messages=batch,
                        existing=[],
                        state=None,
                        state_changes=None,
                        session_id=f"s{index}",
                    )
                )
                found.extend(extraction.candidates)

        elapsed = best_of(args.rounds, run)
        per_second = len(messages) / elapsed
        results[f"extract_{strategy_type}"] = {"messages_per_second": round(per_second), "candidates": len(found)}
        rows.append(
            [f"extract({strategy_type})", len(found), f"{per_second:,.0f}", f"{elapsed / len(messages) * 1e6:.1f}"]
        )

    print_table(["call", "candidates", "messages/s", "µs/message"], rows, title="rules extractor, one core")
    path = write_results("rules_speed", {"machine": machine(), "args": vars(args), "results": results})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
