"""The built-in `rules` extractor and the message scorer: pure Python, no database."""

import pytest

from strategies_app.extractors.base import Candidate, Extraction, ExtractionContext, SourceMessage
from strategies_app.extractors.rules import RulesExtractor, score

SESSION = "0b1c2d3e-0000-4000-8000-000000000001"


def conversation(*turns) -> list[SourceMessage]:
    """Messages m1, m2, ... from texts (user) or (role, text) pairs."""
    out = []
    for seq, turn in enumerate(turns, start=1):
        role, text = turn if isinstance(turn, tuple) else ("user", turn)
        out.append(SourceMessage(id=f"m{seq}", seq=seq, role=role, content=text))
    return out


def extract(strategy_type: str, *turns, existing=(), state=None, state_changes=None) -> list[Candidate]:
    extraction = RulesExtractor().extract(
        ExtractionContext(
            strategy_type=strategy_type,
            prompt="",
            messages=conversation(*turns),
            existing=list(existing),
            state=state,
            state_changes=state_changes,
            session_id=SESSION,
        )
    )
    return extraction.candidates


def only(candidates: list[Candidate]) -> Candidate:
    assert len(candidates) == 1, [(c.slot, c.content) for c in candidates]
    return candidates[0]


def test_the_answer_is_an_extraction_without_token_costs():
    extraction = RulesExtractor().extract(
        ExtractionContext(strategy_type="profile", prompt="", messages=conversation("I like jazz."), existing=[])
    )
    assert isinstance(extraction, Extraction)
    assert extraction.input_tokens == extraction.output_tokens == 0
    assert extraction.latency_ms >= 0
    assert "rules" in extraction.detail
    assert RulesExtractor.name == "rules"


# -- Profile: preferences ------------------------------------------------------------------------------------
def test_a_preference_change_keeps_the_slot_and_changes_the_value():
    soft = only(extract("profile", "I prefer soft lighting at night."))
    bright = only(extract("profile", "Actually, I now prefer bright lighting."))
    assert soft.slot == bright.slot == "prefer:lighting"
    assert (soft.value, bright.value) == ("soft lighting", "bright lighting")
    assert soft.exclusive and bright.exclusive
    assert soft.content == "Prefers soft lighting at night"
    assert bright.content == "Prefers bright lighting"
    assert soft.fields == {
        "kind": "preference",
        "polarity": "prefer",
        "object": "soft lighting",
        "topic": "lighting",
        "qualifier": "at night",
    }


def test_a_chinese_preference_change_keeps_the_slot():
    soft = only(extract("profile", "偏好柔和灯光"))
    bright = only(extract("profile", "我现在更喜欢明亮的灯光。"))
    assert soft.slot == bright.slot == "prefer:灯光"
    assert soft.value != bright.value
    assert soft.content == "偏好柔和灯光"
    assert bright.content == "偏好明亮的灯光"
    assert bright.reason == "rule zh.prefer"


def test_the_same_preference_worded_twice_is_the_same_slot_and_value():
    before = only(extract("profile", "At night I prefer soft lighting."))
    after = only(extract("profile", "I prefer soft lighting at night."))
    assert (before.slot, before.value) == (after.slot, after.value) == ("prefer:lighting", "soft lighting")
    assert before.content == after.content == "Prefers soft lighting at night"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("I prefer tea over coffee.", "These days I'd rather have coffee."),
        ("我更喜欢喝茶", "我现在更喜欢喝咖啡"),
        ("I prefer window seats on long flights.", "I prefer aisle seats."),
    ],
)
def test_choices_of_the_same_kind_share_a_slot(first, second):
    assert only(extract("profile", first)).slot == only(extract("profile", second)).slot


def test_like_and_dislike_of_the_same_thing_share_a_slot():
    like = only(extract("profile", "I really like spicy food!"))
    dislike = only(extract("profile", "I don't like spicy food anymore."))
    assert like.slot == dislike.slot == "like:spicy food"
    assert (like.value, dislike.value) == ("like", "dislike")
    assert like.exclusive
    assert like.content == "Likes spicy food"
    assert dislike.content == "Doesn't like spicy food"


def test_chinese_like_and_dislike_share_a_slot():
    like = only(extract("profile", "我喜欢香菜"))
    dislike = only(extract("profile", "我不再喜欢香菜了"))
    assert like.slot == dislike.slot == "like:香菜"
    assert (like.value, dislike.value) == ("like", "dislike")
    assert dislike.content == "不再喜欢香菜"


def test_one_sentence_can_hold_a_like_and_a_dislike():
    found = {c.slot: c for c in extract("profile", "I like tea but hate coffee.")}
    assert found["like:tea"].value == "like"
    assert found["like:coffee"].value == "dislike"
    assert found["like:coffee"].content == "Hates coffee"
    found = {c.slot: c for c in extract("profile", "我喜欢吃辣的，但是不喜欢香菜。")}
    assert found["like:香菜"].value == "dislike"
    assert found["like:吃辣"].content == "喜欢吃辣的"


def test_the_seed_scenario_budget_and_interest_in_one_message():
    found = {c.slot: c for c in extract("profile", "预算5000元，喜欢人文历史。")}
    assert found["budget"].content == "预算5000元"
    assert found["budget"].value == "5000 CNY"
    assert found["budget"].fields == {"kind": "budget", "amount": 5000, "currency": "CNY"}
    assert found["like:人文历史"].content == "喜欢人文历史"


@pytest.mark.parametrize(
    ("text", "slot", "value", "content"),
    [
        ("I love hiking on weekends.", "like:hiking", "like", "Loves hiking on weekends"),
        ("I can't stand cilantro", "like:cilantro", "dislike", "Can't stand cilantro"),
        ("I'm not a fan of crowded places.", "like:crowded places", "dislike", "Is not a fan of crowded places"),
        ("I no longer like coffee.", "like:coffee", "dislike", "No longer likes coffee"),
        ("My favourite colour is blue.", "prefer:colour", "blue", "Favourite colour is blue"),
        (
            "I'd rather take the train than fly.",
            "prefer:transport",
            "take the train",
            "Would rather take the train than fly",
        ),
        (
            "I usually take the train to work.",
            "habit:take the train to work",
            "usually",
            "Usually takes the train to work",
        ),
        ("I'm a morning person.", "trait:morning person", "morning person", "Is a morning person"),
        ("不爱拥挤景点", "like:拥挤景点", "dislike", "不爱拥挤景点"),
        ("我讨厌排队", "like:排队", "dislike", "讨厌排队"),
        ("我最喜欢的颜色是蓝色", "prefer:颜色", "蓝色", "最喜欢的颜色是蓝色"),
        ("我习惯早上喝咖啡", "habit:早上喝咖啡", "习惯", "习惯早上喝咖啡"),
        ("以后改成暖色灯光", "prefer:灯光", "暖色灯光", "偏好暖色灯光"),
        ("我的爱好是摄影", "like:摄影", "like", "爱好摄影"),
    ],
)
def test_preference_rules(text, slot, value, content):
    candidate = only(extract("profile", text))
    assert (candidate.slot, candidate.value, candidate.content) == (slot, value, content)
    assert candidate.type == "profile"
    assert candidate.reason.startswith("rule ")
    assert 0.7 <= candidate.confidence <= 0.95


# -- Profile: identity, relations, constraints ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Anna Schmidt.", {"identity:name": "Name is Anna Schmidt"}),
        ("Hi, I'm Tom.", {"identity:name": "Name is Tom"}),
        (
            "I'm called Bob and I live in Berlin.",
            {"identity:name": "Name is Bob", "identity:location": "Lives in Berlin"},
        ),
        ("I moved to San Francisco last year.", {"identity:location": "Lives in San Francisco"}),
        ("I'm originally from Shanghai.", {"identity:hometown": "Is from Shanghai"}),
        ("I work as a nurse.", {"identity:job": "Works as a nurse"}),
        (
            "I'm a software engineer at Google.",
            {"identity:job": "Is a software engineer", "identity:employer": "Works at Google"},
        ),
        ("I'm 34 years old.", {"identity:age": "Is 34 years old"}),
        ("我叫小明", {"identity:name": "名字叫小明"}),
        ("我的名字是王小明", {"identity:name": "名字叫王小明"}),
        ("我住在杭州", {"identity:location": "住在杭州"}),
        ("我在上海生活", {"identity:location": "住在上海"}),
        ("我是一名程序员", {"identity:job": "是程序员"}),
        ("我在腾讯工作", {"identity:employer": "在腾讯工作"}),
        ("我今年三十五岁", {"identity:age": "今年35岁"}),
    ],
)
def test_identity_rules(text, expected):
    found = extract("profile", text)
    assert {c.slot: c.content for c in found} == expected
    assert all(c.exclusive for c in found)


def test_identity_values_are_normalised():
    age = only(extract("profile", "我今年三十五岁"))
    assert (age.value, age.fields["age"]) == ("35", 35)
    name = only(extract("profile", "My name is Anna Schmidt."))
    assert name.value == "anna schmidt"
    assert name.fields == {"kind": "identity", "attribute": "name", "value": "Anna Schmidt"}


@pytest.mark.parametrize(
    ("text", "slot", "value", "content"),
    [
        ("My wife is called Anna.", "relation:wife", "anna", "Wife's name is Anna"),
        ("My wife Anna loves hiking.", "relation:wife", "anna", "Wife's name is Anna"),
        ("My dog's name is Max.", "relation:dog", "max", "Dog's name is Max"),
        ("I have a daughter named Lily.", "relation:daughter", "lily", "Daughter's name is Lily"),
        ("My older brother is a doctor.", "relation:older brother:job", "doctor", "Older brother is a doctor"),
        ("我的女儿叫小雨", "relation:daughter", "小雨", "女儿叫小雨"),
        ("我老婆是李娜", "relation:wife", "李娜", "老婆叫李娜"),
        ("我老婆是老师", "relation:wife:job", "老师", "老婆是老师"),
        ("我家狗叫旺财", "relation:dog", "旺财", "狗叫旺财"),
    ],
)
def test_relation_rules(text, slot, value, content):
    candidate = only(extract("profile", text))
    assert (candidate.slot, candidate.value, candidate.content) == (slot, value, content)
    assert candidate.exclusive


@pytest.mark.parametrize(
    ("text", "value", "content", "limit"),
    [
        ("My budget is $500.", "500 USD", "Budget: $500", None),
        ("We have a budget of 3000 yuan for the trip.", "3000 CNY", "Budget: 3000 yuan", None),
        ("I want to spend no more than $200 per night.", "200 USD", "Budget: at most $200 per night", "max"),
        ("酒店预算500元/晚", "500 CNY", "预算500元/晚", None),
        ("My budget is around €1.5k", "1500 EUR", "Budget: about €1.5k", "approx"),
        ("预算大概五千块", "5000 CNY", "预算五千块左右", "approx"),
        ("预算不超过3000元", "3000 CNY", "预算不超过3000元", "max"),
        ("预算是1.5万", "15000 CNY", "预算1.5万", None),
    ],
)
def test_budget_rules(text, value, content, limit):
    candidate = only(extract("profile", text))
    assert (candidate.slot, candidate.value, candidate.content) == ("budget", value, content)
    assert candidate.exclusive
    assert candidate.fields.get("limit") == limit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I'm allergic to peanuts and shellfish.",
            {"allergy:peanuts": "Allergic to peanuts", "allergy:shellfish": "Allergic to shellfish"},
        ),
        ("I can't eat gluten.", {"diet:gluten": "Can't eat gluten"}),
        ("I'm vegetarian.", {"diet:vegetarian": "Is vegetarian"}),
        ("我对花生过敏", {"allergy:花生": "对花生过敏"}),
        ("我不吃辣", {"diet:辣": "不吃辣"}),
        ("我吃素", {"diet:vegetarian": "吃素"}),
    ],
)
def test_allergy_and_diet_rules(text, expected):
    assert {c.slot: c.content for c in extract("profile", text)} == expected


def test_a_budget_per_night_says_so_in_its_fields():
    assert only(extract("profile", "I can spend up to 200 dollars a night.")).fields["per"] == "night"
    assert only(extract("profile", "预算每晚500元以内")).fields == {
        "kind": "budget",
        "amount": 500,
        "currency": "CNY",
        "limit": "max",
        "per": "night",
    }


@pytest.mark.parametrize(
    "text",
    [
        "Do you like spicy food?",
        "What do you prefer?",
        "Which one would you prefer",
        "I don't know.",
        "If I liked jazz I would go to more concerts.",
        "I don't think I like this.",
        "I'd like a coffee, please.",
        "I love it!",
        "I like that idea.",
        "I like the way you structured this.",
        "I prefer the second option.",
        "我更倾向于用第二种方法",
        "I'm tired.",
        "I'm a bit tired today.",
        "Call me later.",
        "I live in a small apartment.",
        "My wife is Chinese.",
        "The server never returns it, and never logs it.",
        "She always forgets and never calls back.",
        "No more than 3 days, please.",
        "你喜欢什么？",
        "你喜欢辣的吗",
        "如果我喜欢爵士乐就好了",
        "我老婆喜欢花",
        "我是一个人",
        "我叫了外卖",
        "我在家工作",
        "我3岁的时候",
        "不超过3天",
    ],
)
def test_questions_negations_and_other_peoples_statements_yield_nothing(text):
    assert extract("profile", text) == []


def test_only_user_messages_are_read_for_the_profile():
    assert extract("profile", ("assistant", "I prefer short answers."), ("toolResult", "I like JSON")) == []


# -- Strategy type, custom, sources, deduplication ----------------------------------------------------------
MIXED = ("I prefer aisle seats. Remember that my passport expires in May.", "I went to Kyoto last week.")


def test_candidates_match_the_strategy_type():
    profile = extract("profile", *MIXED)
    fact = extract("fact", *MIXED)
    assert {c.type for c in profile} == {"profile"}
    assert [c.slot for c in profile] == ["prefer:seat"]
    assert {c.type for c in fact} == {"fact"}
    assert [c.content for c in fact] == ["My passport expires in May", "Went to Kyoto last week"]
    assert extract("task", *MIXED) == []
    assert extract("episodic", *MIXED) == []


def test_custom_strategies_get_the_fact_rules_typed_custom():
    custom = extract("custom", *MIXED)
    assert {c.type for c in custom} == {"custom"}
    assert [c.content for c in custom] == [c.content for c in extract("fact", *MIXED)]


def test_sources_are_the_messages_a_candidate_came_from():
    found = {c.slot: c for c in extract("profile", "Hello!", "I like jazz.", "My name is Tom.")}
    assert found["like:jazz"].source_message_ids == ["m2"]
    assert found["identity:name"].source_message_ids == ["m3"]


def test_a_repeated_statement_is_one_candidate_with_both_sources_and_the_latest_wording():
    found = extract("profile", "I like spicy food.", "ok", "Honestly, I really do like spicy food!")
    candidate = only(found)
    assert candidate.source_message_ids == ["m1", "m3"]
    assert candidate.content == "Likes spicy food"
    restated = only(
        extract("fact", "Remember that the wifi router is in the hallway.", "记住 the wifi router is in the hallway")
    )
    assert restated.source_message_ids == ["m1", "m2"]


@pytest.mark.parametrize(
    "said",
    [
        "Remember that the wifi password is hunter2.",
        "Remember that my OpenAI API key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z and my password is hunter2.",
        "Please remember my PIN is 4321",
        "Note that the prod access token is in the vault under deploy/prod.",
        "Don't forget: my passphrase is correct horse battery staple",
        "记住我的密码是abc123",
        "记住，银行卡密码是六个八",
    ],
)
def test_a_sentence_about_a_credential_is_never_a_memory(said):
    assert extract("fact", said) == []
    assert extract("profile", said) == []


def test_a_change_within_one_batch_keeps_both_in_message_order():
    found = extract("profile", "I prefer soft lighting.", "I now prefer bright lighting.")
    assert [(c.slot, c.value) for c in found] == [
        ("prefer:lighting", "soft lighting"),
        ("prefer:lighting", "bright lighting"),
    ]


def test_messages_are_read_in_seq_order():
    late = SourceMessage(id="late", seq=9, role="user", content="I now prefer bright lighting.")
    early = SourceMessage(id="early", seq=2, role="user", content="I prefer soft lighting.")
    context = ExtractionContext(strategy_type="profile", prompt="", messages=[late, early], existing=[])
    found = RulesExtractor().extract(context).candidates
    assert [c.source_message_ids for c in found] == [["early"], ["late"]]


# -- Facts --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Remember that my passport expires in May.", "My passport expires in May"),
        ("Please remember: my wife's birthday is March 3rd", "My wife's birthday is March 3rd"),
        ("Can you remember that I parked on level 3?", "I parked on level 3"),
        ("Don't forget to water the plants on Friday.", "Remember to water the plants on Friday"),
        ("记住，我的护照五月到期。", "我的护照五月到期"),
        ("请记住我老婆的生日是3月3日", "我老婆的生日是3月3日"),
        ("帮我记一下明天下午三点开会", "明天下午三点开会"),
        ("别忘了周五给植物浇水", "周五给植物浇水"),
    ],
)
def test_remember_rules(text, content):
    candidate = only(extract("fact", text))
    assert candidate.content == content
    assert candidate.confidence == 0.95
    assert not candidate.exclusive
    assert candidate.slot.startswith("fact:")
    assert candidate.fields["kind"] == "remember"


@pytest.mark.parametrize(
    "text",
    ["Remember when we went to Paris?", "I can't remember that.", "Do you remember it?", "我记住了", "你记住了吗"],
)
def test_remembering_that_is_not_an_instruction_yields_nothing(text):
    assert extract("fact", text) == []


@pytest.mark.parametrize(
    ("text", "content", "kind"),
    [
        (
            "Lesson learned: always back up before upgrading.",
            "Lesson learned: always back up before upgrading",
            "lesson",
        ),
        ("Next time I should book the hotel earlier.", "Next time: book the hotel earlier", "lesson"),
        ("It turned out that the router was faulty.", "It turned out that the router was faulty", "lesson"),
        ("经验是先备份再升级。", "经验：先备份再升级", "lesson"),
        ("教训是不要在周五上线", "教训：不要在周五上线", "lesson"),
        ("下次要提前订酒店", "下次要提前订酒店", "lesson"),
        ("I went to Hangzhou last week.", "Went to Hangzhou last week", "event"),
        ("I visited Kyoto in 2023.", "Visited Kyoto in 2023", "event"),
        ("我上周去了杭州", "上周去了杭州", "event"),
        ("上周我去了杭州，玩得很开心", "上周去了杭州", "event"),
        (
            "The way to reset the router is to hold the button for 10 seconds.",
            "To reset the router: hold the button for 10 seconds",
            "procedure",
        ),
        (
            "To reset the router, first unplug it, then hold the button for 10 seconds.",
            "To reset the router: first unplug it, then hold the button for 10 seconds",
            "procedure",
        ),
        ("重置路由器的步骤是先拔电源再按住按钮10秒。", "重置路由器的步骤：先拔电源再按住按钮10秒", "procedure"),
        ("要重置路由器，先拔掉电源，然后按住按钮10秒", "重置路由器：先拔掉电源，然后按住按钮10秒", "procedure"),
    ],
)
def test_lesson_event_and_procedure_rules(text, content, kind):
    candidate = only(extract("fact", text))
    assert (candidate.content, candidate.fields["kind"]) == (content, kind)
    assert 0.7 <= candidate.confidence < 0.95


@pytest.mark.parametrize(
    "text", ["I went to the store.", "我去了趟超市", "原来如此", "What's the way to reset it?", "See you next time!"]
)
def test_everyday_remarks_are_not_facts(text):
    assert extract("fact", text) == []


# -- Task ---------------------------------------------------------------------------------------------------
SMART_HOME = (
    "Help me set up my smart home.",
    ("assistant", "Sure! First install the router. Next, pair the lights with the hub."),
    "OK, the router is installed.",
    "Network configured too. Progress: 60%.",
    "Next step: pair the lights",
)


def test_a_task_summary_from_a_conversation():
    task = only(extract("task", *SMART_HOME))
    assert task.type == "task"
    assert task.slot == f"task:{SESSION}"
    assert not task.exclusive
    assert task.fields == {
        "slot": f"task:{SESSION}",
        "goal": "set up my smart home",
        "stage": "",
        "progress": 60,
        "done": ["router installed", "network configured"],
        "next": ["pair the lights with the hub"],
        "blockers": [],
    }
    assert task.content == (
        "Task: set up my smart home. Progress: 60%. Done: router installed; network configured. "
        "Next: pair the lights with the hub."
    )
    assert task.source_message_ids == ["m1", "m2", "m3", "m4", "m5"]


def test_a_task_summary_merges_the_previous_one():
    previous = only(extract("task", *SMART_HOME))
    record = {"id": "r1", "type": "task", "content": previous.content, "fields": previous.fields}
    other = {"id": "r2", "type": "task", "content": "Another session", "fields": {"slot": "task:other", "goal": "x"}}
    task = only(
        extract(
            "task",
            "The lights are paired now! We're 80% done. I'm stuck on the thermostat though.",
            ("assistant", "Then you should update the thermostat firmware."),
            existing=[other, record],
        )
    )
    assert task.fields["goal"] == "set up my smart home"
    assert task.fields["done"] == ["router installed", "network configured", "lights paired"]
    assert task.fields["next"] == ["update the thermostat firmware"]  # "pair the lights" is done now
    assert task.fields["blockers"] == ["thermostat"]
    assert task.fields["progress"] == 80
    assert task.source_message_ids == ["m1", "m2"]

    record = {"id": "r1", "type": "task", "content": task.content, "fields": task.fields}
    later = only(extract("task", "The thermostat firmware is updated and the thermostat works now.", existing=[record]))
    assert later.fields["blockers"] == []
    assert later.fields["next"] == []
    assert later.fields["done"][-1] == "thermostat working"


def test_a_task_summary_stays_compressed():
    previous = {
        "slot": f"task:{SESSION}",
        "goal": "move house",
        "stage": "packing",
        "progress": 10,
        "done": [f"box {n} packed" for n in range(1, 9)],
        "next": [f"call company {n}" for n in range(1, 6)],
        "blockers": [],
    }
    task = only(
        extract(
            "task",
            "The kitchen is packed. The garage is cleaned.",
            "Next step: book the van. I still need to cancel the internet.",
            existing=[{"id": "r1", "type": "task", "content": "...", "fields": previous}],
        )
    )
    assert len(task.fields["done"]) == 8
    assert task.fields["done"][-2:] == ["kitchen packed", "garage cleaned"]
    assert task.fields["done"][0] == "box 3 packed"
    assert len(task.fields["next"]) == 5
    assert task.fields["next"][-2:] == ["book the van", "cancel the internet"]
    assert task.fields["stage"] == "packing"


def test_a_previous_summary_in_a_loose_shape_is_merged():
    """The previous task record may come from the LLM extractor or an edit: strings, floats, nulls."""
    loose = {"slot": f"task:{SESSION}", "goal": None, "stage": "wiring", "progress": "40%", "done": "router installed"}
    task = only(
        extract(
            "task", "Lights are paired now.", existing=[{"id": "r1", "type": "task", "content": "", "fields": loose}]
        )
    )
    assert task.fields["done"] == ["router installed", "lights paired"]
    assert (task.fields["goal"], task.fields["stage"], task.fields["progress"]) == ("", "wiring", 40)


def test_a_stage_change_in_the_state_is_a_task_record():
    task = only(
        extract("task", state={"stage": "网络配置完成"}, state_changes={"stage": ["路由器安装", "网络配置完成"]})
    )
    assert task.fields["stage"] == "网络配置完成"
    assert task.fields["done"] == ["路由器安装", "网络配置完成"]
    assert task.content == "阶段：网络配置完成。已完成：路由器安装；网络配置完成。"
    assert task.source_message_ids == []
    assert task.confidence == 0.9
    assert task.reason == "rule task.state"


def test_state_progress_and_goal_feed_the_summary():
    task = only(extract("task", state={"goal": "plan a 3-day Hangzhou trip", "status": "drafting", "progress": 0.4}))
    assert task.fields["goal"] == "plan a 3-day Hangzhou trip"
    assert task.fields["stage"] == "drafting"
    assert task.fields["progress"] == 40
    assert task.content == "Task: plan a 3-day Hangzhou trip. Stage: drafting (40%)."


def test_a_chinese_task_summary():
    task = only(
        extract(
            "task",
            "帮我配置一下智能家居",
            ("assistant", "好的，先安装路由器。"),
            "路由器已经装好了，网络配置完成了。进度60%。下一步配对灯光",
            "卡在温控器上了",
        )
    )
    assert task.fields["goal"] == "配置智能家居"
    assert task.fields["done"] == ["路由器装好", "网络配置完成"]
    assert task.fields["next"] == ["配对灯光"]
    assert task.fields["blockers"] == ["温控器"]
    assert (
        task.content
        == "任务：配置智能家居。进度：60%。已完成：路由器装好；网络配置完成。下一步：配对灯光。阻碍：温控器。"
    )


@pytest.mark.parametrize(("text", "progress"), [("We're on step 3 of 5.", 60), ("第2步，共4步", 50), ("进度是75%", 75)])
def test_progress_rules(text, progress):
    assert only(extract("task", text)).fields["progress"] == progress


def test_a_new_sessions_opening_request_is_its_goal():
    task = only(extract("task", "Plan a three-day trip to Hangzhou for me.", "Step 1 of 3 is the hotel."))
    assert task.fields["goal"] == "Plan a three-day trip to Hangzhou for me"
    assert task.fields["progress"] == 33


def test_no_task_signal_no_candidate():
    assert extract("task", "Hello!", "How are you?", ("assistant", "Fine, thanks.")) == []
    assert extract("task", "Is the router installed?") == []
    assert extract("task", "Once the router is installed, pair the lights.") == []


def test_nothing_new_for_the_task_no_candidate():
    previous = only(extract("task", *SMART_HOME))
    record = {"id": "r1", "type": "task", "content": previous.content, "fields": previous.fields}
    assert extract("task", "OK, the router is installed.", existing=[record]) == []


# -- The scorer ---------------------------------------------------------------------------------------------
TOOL_OUTPUT = 'FAILED tests/test_billing.py::test_invoice_total - AssertionError\n  File "/app/src/jobs/export.py"'


def test_the_scorer_ranks_memorable_messages_first():
    assert score("I prefer window seats", "user") > score("ok thanks", "user")
    assert score("I prefer window seats", "user") > score(TOOL_OUTPUT, "toolResult")
    assert score("我偏好靠窗的座位", "user") > score("好的，谢谢", "user")
    assert score("I prefer window seats", "user") > score("👍", "user")
    assert score("Remember that my passport expires in May", "user") > score("Can you explain that again?", "user")
    assert score("The router is done, next step is the lights", "assistant") > score("Sure!", "assistant")
    assert score("The router is done, next step is the lights", "user") > score("Let me think about it", "user")


@pytest.mark.parametrize("role", ["user", "assistant", "toolResult", "error", "system"])
@pytest.mark.parametrize("text", ["", "ok", "I prefer window seats", "我叫小明", TOOL_OUTPUT, "x" * 10_000])
def test_scores_are_between_zero_and_one(text, role):
    assert 0.0 <= score(text, role) <= 1.0
