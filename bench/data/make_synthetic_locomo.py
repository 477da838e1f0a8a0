"""Write bench/data/synthetic_locomo.json: a small hand-written conversational memory dataset in the LoCoMo
JSON layout, for the CI smoke test of bench/locomo.py.

Three samples (two friends each, 4–5 sessions of 12–14 turns, English with some Chinese), 46 questions with
evidence dia_ids. Some questions reuse the evidence's words (names, numbers), others paraphrase it, and some
ask in one language about a turn written in the other. Categories follow LoCoMo's numbering: 1 multi-hop,
2 temporal, 4 single-hop (no open-domain or adversarial items here).

Deterministic: `python bench/data/make_synthetic_locomo.py` rewrites the same file. It is a smoke test, not a
benchmark: nothing in the recall method may be tuned to it.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "synthetic_locomo.json"

# Each sample: (sample_id, speaker_a, speaker_b, sessions, qa). A session is (date_time, turns); turns
# alternate speakers starting with the one named first ("a" or "b").
SAMPLES = [
    (
        "maya-tom",
        "Maya",
        "Tom",
        [
            (
                "1:56 pm on 8 May, 2023",
                "a",
                [
                    "Hey Tom! Guess what, we finally adopted a dog from the shelter on Saturday.",
                    "No way, congratulations! What kind of dog is it?",
                    "She's a two-year-old beagle mix. We named her Biscuit because of her light brown coat.",
                    "Biscuit is a perfect name. How is she settling in?",
                    "She's a bit nervous at night, she keeps whining near the door, but during the day she follows "
                    "me everywhere.",
                    "That's normal for shelter dogs. My cousin's greyhound took about a month to relax.",
                    "Good to know. How's work going for you? Last time you sounded really tired.",
                    "Honestly, I'm thinking of quitting the insurance company. Spreadsheets all day are draining me.",
                    "What would you do instead?",
                    "I've always wanted to bake bread professionally. There's an evening pastry course at the "
                    "community college.",
                    "You should do it! Your sourdough at the picnic last summer was amazing.",
                    "Thanks. It costs 1,200 dollars though, so I need to think about it.",
                    "Let me know if you want me to look over your budget.",
                    "I might take you up on that. Give Biscuit a scratch behind the ears for me.",
                ],
            ),
            (
                "10:15 am on 27 May, 2023",
                "b",
                [
                    "I signed up for the pastry course! First class is next Tuesday.",
                    "Yay! I knew you would. What will you learn first?",
                    "Laminated doughs, croissants and puff pastry. Apparently the butter has to stay really cold.",
                    "I'd volunteer as a taste tester any time.",
                    "Deal. How's Biscuit?",
                    "Much calmer. We started an obedience class on Sunday mornings, she already knows sit and stay.",
                    "That's fast progress.",
                    "The trainer says she's food motivated, which is a polite way of saying she's greedy.",
                    "Ha, a beagle that loves food, shocking.",
                    "Also, I've decided to run the Riverside Half Marathon in October.",
                    "Wow, 21 kilometres! Have you run that far before?",
                    "My longest run so far is 12 km, so I downloaded a sixteen-week training plan.",
                    "If you need company on weekends, I can bike next to you.",
                    "That would help a lot, the long runs get lonely.",
                ],
            ),
            (
                "7:30 pm on 19 June, 2023",
                "a",
                [
                    "Ugh, I twisted my ankle on a trail run yesterday.",
                    "Oh no! Is it bad?",
                    "The doctor said it's a mild sprain. No running for two weeks, ice and rest.",
                    "That's frustrating in the middle of your training.",
                    "Yeah, I'm going to the community pool instead so I don't lose fitness.",
                    "Smart. Swimming is easy on the joints.",
                    "How's the pastry course?",
                    "We made croissants last week and mine came out flat. The chef said my kitchen was too warm.",
                    "So the butter melted?",
                    "Exactly. Now I chill the dough between every fold. The second batch was much flakier.",
                    "Bring some to my place on Friday, my sister Lena is visiting from Toronto.",
                    "Sure, I'll bring almond croissants. Does Lena have any allergies?",
                    "She can't eat walnuts, but almonds are fine.",
                    "Got it, nothing with walnuts.",
                ],
            ),
            (
                "3:05 pm on 2 September, 2023",
                "b",
                [
                    "Big news: the bakery on Elm Street offered me a part-time job on weekends.",
                    "That's amazing! Are you leaving the insurance job?",
                    "Not yet. I'll keep the office job for now and do Saturday and Sunday shifts from 5 am.",
                    "5 am is brutal. You'll need a lot of coffee.",
                    "The head baker, Rosa, says you get used to it after a month.",
                    "My ankle is fully healed by the way. I ran 18 km last Sunday.",
                    "Your longest ever! How did it feel?",
                    "My legs were dead for the last three kilometres, but I kept a steady pace.",
                    "Are you on track for October?",
                    "I think so. The race is on October 15th and I want to finish in 2 hours 10 minutes.",
                    "I'll be at the finish line with a sign.",
                    "Biscuit will come too, she loves crowds now.",
                ],
            ),
            (
                "9:40 am on 20 October, 2023",
                "a",
                [
                    "I did it! I crossed the line in 2:06:41.",
                    "Under your goal! I'm so proud of you. Sorry I missed the finish, the bakery called me in.",
                    "No worries, Lena flew in and held up your sign for you.",
                    "Ha, I love that. How are your legs?",
                    "Stairs are my enemy this week. I'm taking a break from running until November.",
                    "Well deserved. I have news too: I handed in my notice at the insurance company.",
                    "Really? You're going full-time at the bakery?",
                    "Rosa offered me a full-time position starting in December. I'll be in charge of the bread "
                    "station.",
                    "That's your dream job! We have to celebrate.",
                    "Let's go to that Korean barbecue place you like once your legs recover.",
                    "Perfect. I'll bring new photos of Biscuit, she got a little raincoat.",
                    "A beagle in a raincoat, I need to see that.",
                ],
            ),
        ],
        [
            ("What breed is Maya's dog?", "A beagle mix", ["D1:3"], 4),
            ("What is the name of the dog Maya adopted?", "Biscuit", ["D1:1", "D1:3"], 1),
            ("How much does Tom's evening pastry course cost?", "1,200 dollars", ["D1:12"], 4),
            ("What company did Tom work for before the bakery?", "An insurance company", ["D1:8", "D5:6"], 1),
            ("What does Biscuit's trainer think of her?", "That she is food motivated (greedy)", ["D2:8"], 4),
            (
                "How far had Maya ever run when she signed up for the half marathon?",
                "12 km",
                ["D2:10", "D2:12"],
                2,
            ),
            ("Why did Tom's first croissants come out flat?", "His kitchen was too warm", ["D3:8", "D3:9"], 4),
            ("What injury did Maya get while training?", "A mild ankle sprain", ["D3:1", "D3:3"], 4),
            ("How did Maya keep fit while her injury healed?", "Swimming at the community pool", ["D3:5"], 4),
            ("Which nut is Lena allergic to?", "Walnuts", ["D3:13"], 4),
            ("Which city does Maya's sister come from?", "Toronto", ["D3:11"], 4),
            ("Who is the head baker at the bakery on Elm Street?", "Rosa", ["D4:1", "D4:5"], 4),
            ("What was Maya's finishing time in the half marathon?", "2:06:41", ["D5:1"], 4),
            ("Did Maya beat the goal she set for the race?", "Yes: goal 2:10, finished 2:06:41", ["D4:10", "D5:1"], 1),
            ("When does Tom start working full-time as a baker?", "In December", ["D5:8"], 2),
            ("Who held up Tom's sign at the finish line?", "Lena", ["D5:3"], 4),
        ],
    ),
    (
        "lina-david",
        "Li Na",
        "David",
        [
            (
                "4:20 pm on 3 March, 2023",
                "a",
                [
                    "David, I got the job offer from the design studio in Hangzhou!",
                    "Congratulations! When do you move?",
                    "下个月初搬过去，公司就在西湖边上，我已经开始找房子了。",
                    "西湖! That sounds beautiful. Are you renting alone?",
                    "I'll share a flat with my college roommate Xiaoyu, she already works there as a nurse.",
                    "Nice, that makes moving much easier.",
                    "最难的是怎么把我的猫小白带过去，她坐车会晕。",
                    "Ask the vet about motion sickness pills for cats, they worked for my friend's cat.",
                    "Good idea, I'll call the vet tomorrow.",
                    "By the way, I started learning Mandarin on an app, I'm on a 120-day streak.",
                    "太厉害了！你现在会说什么？",
                    "我会说“我很饿”和“这个多少钱”. Very useful phrases.",
                    "Those are the two most important phrases in China, honestly.",
                ],
            ),
            (
                "8:05 pm on 22 April, 2023",
                "b",
                [
                    "How's Hangzhou treating you?",
                    "很好！新同事都很友好，我负责一个茶叶品牌的包装设计。",
                    "Tea packaging, that fits Hangzhou perfectly. Longjing tea, right?",
                    "Exactly, the client grows Longjing tea in the hills near Meijiawu village.",
                    "How did the cat handle the trip?",
                    "小白吃了药以后一路都在睡觉，到了新家第二天就开始到处探索了。",
                    "Great to hear. I have some news: I'm going to visit China in September!",
                    "真的吗？你会来杭州吗？",
                    "Yes, Shanghai first for a conference, then three days in Hangzhou.",
                    "I'll show you around. We can cycle around West Lake and drink tea at a tea house.",
                    "Perfect. I'll practice ordering tea in Chinese.",
                    "我最近在学吉他，每周六上午上课。",
                    "Guitar! What songs are you learning?",
                    "Right now 'Wonderwall'. The chords are easy but the strumming is hard.",
                ],
            ),
            (
                "11:30 am on 10 June, 2023",
                "a",
                [
                    "我奶奶下个月过八十岁生日，我们全家要回成都给她庆祝。",
                    "Eighty! What are you planning for her?",
                    "A big dinner with hotpot, she loves spicy food even at her age.",
                    "Ha, a true Sichuan grandmother.",
                    "I'm also painting her a watercolor of her old house in the countryside.",
                    "That's a really thoughtful gift.",
                    "How's your Mandarin going?",
                    "I passed HSK level 2 last week! 我考过了二级。",
                    "恭喜你！That's a real milestone.",
                    "My tutor, Mr. Zhou, says I should try level 3 before my trip.",
                    "You should practice with Xiaoyu when you come, she talks really fast though.",
                    "Good practice for listening, I guess.",
                ],
            ),
            (
                "6:45 pm on 28 July, 2023",
                "a",
                [
                    "奶奶的生日宴非常成功，她看到那幅画的时候哭了。",
                    "Aw, that's lovely. She must have been touched.",
                    "She said she'll hang it in the living room next to my grandfather's photo.",
                    "That's really sweet. How was the hotpot?",
                    "太辣了，我表弟吃得满头大汗，奶奶却一点事都没有。",
                    "Your grandma is tougher than all of you.",
                    "Definitely. Are your plans for September fixed?",
                    "I booked my flight: I land in Shanghai on September 12 and take the train to Hangzhou on the "
                    "16th.",
                    "The high-speed train takes just under an hour.",
                    "Great. Can you recommend a hotel near the lake?",
                    "我帮你问问，我同事的朋友在北山路开了一家民宿。",
                    "A guesthouse sounds even better than a hotel.",
                ],
            ),
            (
                "10:10 pm on 25 September, 2023",
                "b",
                [
                    "I'm back home. Thank you for the amazing three days in Hangzhou.",
                    "我也很开心！你的中文进步好大。",
                    "The tea house in Longjing village was the highlight for me.",
                    "The owner liked you because you ordered in Chinese.",
                    "And Xiaoyu's dumplings! I still think about them.",
                    "她说下次你来要教你包饺子。",
                    "I'm holding her to that. Also, Xiaobai sat on my suitcase the whole morning I left.",
                    "She didn't want you to leave! 小白很少这么喜欢陌生人。",
                    "Any news on your side?",
                    "The Longjing packaging design won an award at Hangzhou Design Week.",
                    "That's fantastic! You should be proud.",
                    "The client wants me to design their new green tea gift box next.",
                ],
            ),
        ],
        [
            ("Which city did Li Na move to for her new job?", "Hangzhou", ["D1:1", "D1:3"], 4),
            ("Who does Li Na share her flat with?", "Xiaoyu, her college roommate, a nurse", ["D1:5"], 4),
            ("李娜的猫叫什么名字？", "小白", ["D1:7"], 4),
            ("What did David suggest for the cat getting carsick?", "Motion sickness pills from the vet", ["D1:8"], 4),
            (
                "What kind of product does Li Na design packaging for?",
                "A tea brand (Longjing tea)",
                ["D2:2", "D2:4"],
                1,
            ),
            ("李娜周末在学什么乐器？", "吉他，每周六上午", ["D2:12"], 4),
            ("Which song is Li Na practising?", "Wonderwall", ["D2:14"], 4),
            ("How old is Li Na's grandmother turning?", "80", ["D3:1"], 4),
            ("What present did Li Na make for her grandmother?", "A watercolor of her old house", ["D3:5"], 4),
            ("Where did Li Na's family go for the grandmother's birthday?", "Chengdu", ["D3:1"], 4),
            ("Which Mandarin exam did David pass?", "HSK level 2", ["D3:8"], 4),
            ("Who is David's Mandarin tutor?", "Mr. Zhou", ["D3:10"], 4),
            ("When does David arrive in Shanghai?", "September 12", ["D4:8"], 2),
            ("奶奶收到画以后有什么反应？", "她哭了，要把画挂在客厅", ["D4:1", "D4:3"], 1),
            ("What prize did Li Na's design get?", "An award at Hangzhou Design Week", ["D5:10"], 4),
            (
                "What did David enjoy most about his visit to Hangzhou?",
                "The tea house in Longjing village",
                ["D5:3"],
                4,
            ),
        ],
    ),
    (
        "priya-sam",
        "Priya",
        "Sam",
        [
            (
                "2:00 pm on 14 January, 2023",
                "a",
                [
                    "Happy new year, Sam! Did you make any resolutions?",
                    "Happy new year! I want to read 24 books this year, two a month.",
                    "Ambitious! I'm going to grow my own vegetables on the balcony.",
                    "What are you planning to grow?",
                    "Cherry tomatoes, basil and chillies to start with. I bought seeds at the garden centre yesterday.",
                    "Basil and tomatoes, you'll have your own caprese salad.",
                    "That's the plan! What's the first book on your list?",
                    "The Remains of the Day by Kazuo Ishiguro. My book club picked it for February.",
                    "I read that in university, the ending is quietly heartbreaking.",
                    "No spoilers please!",
                    "My lips are sealed. How's your sister doing?",
                    "Nora just got engaged! The wedding will be in Lisbon in June.",
                    "Oh, Lisbon in summer, how romantic.",
                ],
            ),
            (
                "5:30 pm on 2 March, 2023",
                "b",
                [
                    "Our car broke down on the motorway on Sunday, what a day.",
                    "Oh no, what happened?",
                    "The alternator died. We waited three hours for the tow truck in the rain.",
                    "That sounds miserable. Is it fixed?",
                    "The garage charged us 450 pounds, but it runs again.",
                    "Ouch. At least it's working.",
                    "How are your seedlings?",
                    "The tomatoes have sprouted, but the basil died. I think I gave it too much water.",
                    "Basil is fussy. My mum keeps hers on the kitchen windowsill.",
                    "I'll try again with a smaller pot and only water it when the soil is dry.",
                    "Book club discussed the Ishiguro last week, by the way. Everyone cried at the ending.",
                    "Told you! What's next?",
                    "Klara and the Sun, also Ishiguro. We're on a streak.",
                ],
            ),
            (
                "12:15 pm on 20 April, 2023",
                "a",
                [
                    "I got promoted! I'm now the lead data analyst on the hospital project.",
                    "Congratulations, you've worked so hard for this.",
                    "It means managing a team of four, which is a bit scary.",
                    "You'll be great at it, you're very patient.",
                    "Thanks. How are the wedding plans?",
                    "Nora asked me to give a speech. I'm terrified of public speaking.",
                    "Start with a funny story from when you were kids.",
                    "There's the time she cut my hair with kitchen scissors when I was six.",
                    "Perfect opening line.",
                    "And the garden?",
                    "The first cherry tomatoes are turning red! The chillies are flowering too.",
                    "You'll have to share your harvest.",
                ],
            ),
            (
                "8:20 pm on 25 June, 2023",
                "b",
                [
                    "Back from Lisbon! The wedding was beautiful, in a small chapel overlooking the river.",
                    "How did the speech go?",
                    "People laughed at the haircut story and Nora cried. I was shaking but it went well.",
                    "I'm so proud of you. Did you try pastéis de nata?",
                    "At least a dozen. We also took the old yellow tram 28 through Alfama.",
                    "Sounds perfect. I made my first batch of chilli sauce from the balcony chillies.",
                    "Homegrown hot sauce, impressive! Is it very spicy?",
                    "Very. My team at work tried it and only one person could finish a spoonful.",
                    "How's managing the team going?",
                    "Better than I expected. We delivered the first hospital dashboard two weeks early.",
                    "Well done! I'm on book 11 of 24 by the way.",
                    "Right on track for your resolution.",
                ],
            ),
        ],
        [
            ("How many books does Sam want to read this year?", "24", ["D1:2"], 4),
            ("What is Priya growing on her balcony?", "Cherry tomatoes, basil and chillies", ["D1:3", "D1:5"], 1),
            ("Who wrote the first book Sam's book club read?", "Kazuo Ishiguro", ["D1:8"], 4),
            ("Where is Nora getting married?", "Lisbon", ["D1:12"], 4),
            ("What part of Sam's car failed?", "The alternator", ["D2:1", "D2:3"], 1),
            ("How much did the garage charge to fix the car?", "450 pounds", ["D2:5"], 4),
            ("Why did Priya's basil die?", "She overwatered it", ["D2:8"], 4),
            ("What is Priya's new role after her promotion?", "Lead data analyst", ["D3:1"], 4),
            (
                "What childhood story did Sam plan to tell in his speech?",
                "His sister cut his hair with kitchen scissors",
                ["D3:8"],
                4,
            ),
            ("How did the guests react to Sam's speech?", "They laughed and Nora cried", ["D4:3"], 4),
            ("What did Priya make with her chillies?", "Chilli sauce", ["D4:6"], 4),
            ("Which tram did Sam ride in Lisbon?", "Tram 28", ["D4:5"], 4),
            ("How many books had Sam read by the end of June?", "11", ["D4:11"], 2),
            ("What did Priya's team deliver ahead of schedule?", "The first hospital dashboard", ["D4:10"], 4),
        ],
    ),
]


def build() -> list[dict]:
    samples = []
    for sample_id, speaker_a, speaker_b, sessions, qa in SAMPLES:
        conversation: dict = {"speaker_a": speaker_a, "speaker_b": speaker_b}
        for n, (date_time, first, turns) in enumerate(sessions, start=1):
            order = [speaker_a, speaker_b] if first == "a" else [speaker_b, speaker_a]
            conversation[f"session_{n}_date_time"] = date_time
            conversation[f"session_{n}"] = [
                {"speaker": order[i % 2], "dia_id": f"D{n}:{i + 1}", "text": text} for i, text in enumerate(turns)
            ]
        known = {turn["dia_id"] for n in range(1, len(sessions) + 1) for turn in conversation[f"session_{n}"]}
        items = []
        for question, answer, evidence, category in qa:
            missing = set(evidence) - known
            if missing:
                raise ValueError(f"{sample_id}: {question!r} cites unknown turns {sorted(missing)}")
            items.append({"question": question, "answer": answer, "evidence": evidence, "category": category})
        samples.append({"sample_id": sample_id, "conversation": conversation, "qa": items})
    return samples


def main() -> None:
    samples = build()
    OUT.write_text(json.dumps(samples, ensure_ascii=False, indent=1) + "\n")
    turns = sum(
        len(v)
        for s in samples
        for k, v in s["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )
    print(f"wrote {OUT}: {len(samples)} samples, {turns} turns, {sum(len(s['qa']) for s in samples)} questions")


if __name__ == "__main__":
    main()
