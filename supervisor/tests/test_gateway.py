"""The gateway through its real boundaries: a fake Gemini on loopback, a real Gateway, a client POSTing as a seed does.

Each test names a rule the gateway keeps for the free tier; none needs a key or the network.
"""
import contextlib
import json
import socket
import sqlite3
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
import requests

import fake_gemini as api
from conftest import load_keeper, requests_booked

gateway_module, answers, door, gemini, ledger_module = (load_keeper(name) for name in
                                                        ("gateway", "answers", "door", "gemini", "ledger"))
Gateway, Plan = gateway_module.Gateway, load_keeper("outcomes").Plan
CUT_AT_THE_LIMIT = "cut off (MAX_TOKENS: the answer was cut off at its token limit): kept the 1 file(s) that came whole"
KEY = "AIzaSy" + uuid.uuid4().hex + uuid.uuid4().hex[:1]  # the shape of a real key: AIza and 35 characters
FLASH, LITE, GEMMA = "gemini-3.5-flash", "gemini-3.5-flash-lite", "gemma-4-26b-a4b-it"
PACIFIC = ZoneInfo("America/Los_Angeles")
SCHEMA = {"type": "OBJECT", "required": ["tasks", "files"], "properties": {
    "tasks": {"type": "ARRAY", "items": {"type": "STRING"}}, "done": {"type": "ARRAY", "items": {"type": "INTEGER"}},
    "files": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {"path": {"type": "STRING"},
                                                                        "content": {"type": "STRING"}}}}}}
RULES = "You are the engine of a codebase that grows itself. Answer with JSON."
NOTES = [("notes.py", "def add(text):\n    return text\n")]


@pytest.fixture
def upstream(gemini):
    """The real API's stand-in, upstream of the gateway: conftest's fake Gemini."""
    return gemini


@pytest.fixture
def said():
    return []


@pytest.fixture
def state(tmp_path):
    return tmp_path / "backups"


@pytest.fixture
def gateway(upstream, state, said):
    """Makes started gateways on the fake, with tiny backoff; closes them after the test."""
    made = []

    def make(models=(FLASH,), upstream_url=None, key=KEY, **settings):
        settings = {"limits": "", "backoff": 0.01, "say": said.append, **settings}
        made.append(Gateway(gemini.Gemini(upstream_url or upstream.url, key, list(models)), state, **settings))
        made[-1].start()
        return made[-1]

    yield make
    for gw in made:
        gw.close()


def seed_body(text="# Goal\nGrow notes.py.", **config):
    """A request as the seed sends it: rules as the system instruction, strict JSON asked for."""
    return {"systemInstruction": {"parts": [{"text": RULES}]},
            "contents": [{"role": "user", "parts": [{"text": text}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": SCHEMA, **config}}


def ask(gw, token, body=None, model=FLASH, timeout=30):
    return requests.post(f"{gw.url}/v1beta/models/{model}:generateContent", json=body or seed_body(),
                         headers={"x-goog-api-key": token}, timeout=timeout)


def answer_of(response):
    [part] = response.json()["candidates"][0]["content"]["parts"]
    return json.loads(part["text"])


def next_pacific_midnight():
    tomorrow = datetime.now(PACIFIC).date() + timedelta(days=1)
    return datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=PACIFIC)


def quota_error(quota_id, value, delay, message="You exceeded your current quota."):
    violation = {"quotaId": quota_id, "quotaValue": value}
    return api.error(429, "RESOURCE_EXHAUSTED", message, [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}])


def budget_for(tokens_a_minute):
    """The prompt budget of a model taking this many input tokens a minute: a margin under it, room for the fold."""
    return int((tokens_a_minute - answers.FOLD_TOKENS) / answers.MARGIN)


def seconds_from_now(moment):
    return (moment - datetime.now(timezone.utc)).total_seconds()


# --- the door ---------------------------------------------------------------------------------
def test_a_wrong_or_stale_token_gets_401_and_nothing_is_forwarded(gateway, upstream, state):
    gw = gateway()
    assert ask(gw, "no-run-yet").status_code == 401
    plan = gw.open_run()
    assert ask(gw, plan.token + "x").status_code == 401
    assert ask(gw, KEY).status_code == 401  # the real key is no token either
    gw.close_run(plan.token)
    stale = ask(gw, plan.token)
    assert stale.status_code == 401 and stale.json()["error"]["status"] == "UNAUTHENTICATED"
    assert upstream.requests == [] and requests_booked(state) == {}


def test_requests_beyond_the_runs_cap_get_429_and_are_not_forwarded(gateway, upstream, state):
    upstream.reply(api.answer(NOTES)).reply(api.answer(NOTES))
    gw = gateway(requests_per_run=1)
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    capped = ask(gw, plan.token)
    assert capped.status_code == 429 and capped.json()["error"]["message"].startswith("request cap reached")
    report = gw.close_run(plan.token)
    assert len(upstream.requests) == 1 and report.requests == 1 and report.answered and report.problem is None
    assert requests_booked(state)[FLASH]["requests"] == 1


def test_the_model_in_the_path_is_advisory_and_no_token_goes_upstream(gateway, upstream):
    upstream.reply(api.answer(NOTES))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token, seed_body(), model="gemini-9-ultra").status_code == 200
    [sent] = upstream.requests
    assert sent["path"] == f"/v1beta/models/{FLASH}:generateContent"
    assert sent["headers"]["x-goog-api-key"] == KEY and KEY not in sent["path"]
    assert plan.token not in json.dumps(sent, default=bytes.decode)  # the bytes it came as, too
    assert sent["body"]["generationConfig"]["responseSchema"] == SCHEMA
    assert sent["body"]["systemInstruction"] == {"parts": [{"text": RULES}]}


# --- what may be asked, and of whom -----------------------------------------------------------
def test_each_model_gets_the_budget_its_minute_can_take(gateway, monkeypatch):
    assert gateway([FLASH]).open_run().budget == 60_000
    assert gateway([FLASH], prompt_tokens=30_000).open_run().budget == 30_000
    assert gateway([FLASH], prompt_tokens=3_000).open_run().budget == 3_000  # the user's, however small
    plan = gateway([GEMMA]).open_run()
    assert plan.model == GEMMA and plan.budget == budget_for(16_000) < 12_000
    assert gateway(["gemini-9-flash"]).open_run().budget == budget_for(16_000)  # unknown: the cautious row
    monkeypatch.setenv("GEMINI_LIMITS", f"{GEMMA}=30/40000/1500")
    assert gateway([GEMMA], limits=None).open_run().budget == budget_for(40_000)
    with pytest.raises(ValueError, match="GEMINI_LIMITS: 'gemma=30' is not model=requests a minute"):
        gateway([GEMMA], limits="gemma=30")


def test_a_prompt_too_big_for_gemmas_minute_is_never_forwarded(gateway, upstream, state):
    gw = gateway([GEMMA])
    plan = gw.open_run()
    response = ask(gw, plan.token, seed_body("x" * 16_000 * 3))
    assert response.status_code == 400 and "over this run's budget" in response.json()["error"]["message"]
    assert upstream.requests == [] and requests_booked(state) == {}
    assert gw.close_run(plan.token).requests == 0


def test_a_spent_day_is_skipped_until_midnight_pacific_and_remembered_by_a_new_gateway(gateway, upstream):
    upstream.reply(api.per_day())
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 429
    delay = response.json()["error"]["details"][0]["retryDelay"]
    assert abs(float(delay.rstrip("s")) - seconds_from_now(next_pacific_midnight())) < 3
    problem = gw.close_run(plan.token).problem
    assert problem.kind == "wait" and problem.until == next_pacific_midnight() and FLASH in problem.why
    gw.close()
    again = gateway().open_run()
    assert again.wait_until == next_pacific_midnight() and "daily quota spent" in again.why
    assert len(upstream.requests) == 1


def test_a_day_whose_requests_the_ledger_counted_is_skipped_without_asking(gateway, upstream):
    upstream.reply(api.answer(NOTES))
    gw = gateway([FLASH, LITE], limits=f"{FLASH}=5/250000/1")
    plan = gw.open_run()
    assert plan.model == FLASH and ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    assert gw.open_run().model == LITE
    assert gateway([FLASH], limits=f"{FLASH}=5/250000/1").open_run().wait_until == next_pacific_midnight()
    assert upstream.models_asked() == [FLASH]


def test_a_model_whose_prompt_cannot_hold_the_persons_goal_and_tasks_is_not_planned(gateway, upstream):
    upstream.reply(api.answer(NOTES))
    goal = 50_000 * 3  # characters of goal.md and the open tasks: about 50,000 tokens
    assert gateway([GEMMA, FLASH], prompt_tokens=100_000).open_run(goal).model == FLASH
    stop = gateway([GEMMA]).open_run(goal).stop
    assert f"{GEMMA}: goal.md and the open tasks (~50,000 tokens), with the seed's rules, the log's end and a little " \
           f"code (~2,000), are ~40,375 tokens over its prompt of 11,625" in stop
    assert stop.endswith("shorten them.") and "GEMINI_MODEL" not in stop  # the files to fix, not the models
    gw = gateway([FLASH, GEMMA], limits=f"{FLASH}=5/250000/1", prompt_tokens=100_000)
    plan = gw.open_run(goal)
    assert plan.model == FLASH and ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    spent = gw.open_run(goal)  # Flash's day is spent and Gemma cannot take the goal: wait for Flash, and say why
    assert spent.wait_until == next_pacific_midnight() and "goal.md and the open tasks" in spent.why
    assert gateway([GEMMA]).open_run(3_000).model == GEMMA  # a goal of a few lines: Gemma as before
    assert upstream.models_asked() == [FLASH]


@pytest.mark.parametrize("name", ["../../../etc/passwd", "gemini-3.5-flash?key=x#", "models/gemini-3.5-flash"])
def test_a_model_name_that_is_not_one_is_a_setting_to_fix(gateway, name):
    with pytest.raises(ValueError, match="is not a model's name"):
        gateway([name])


def test_network_errors_do_not_spend_the_day(gateway, state):
    closed = socket.create_server(("127.0.0.1", 0))
    unreachable = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    gw = gateway(limits=f"{FLASH}=5/250000/3", upstream_url=unreachable)
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 503 and "check the network, or GEMINI_API_BASE in .env" in \
        response.json()["error"]["message"]  # a server of the tests', not Google's: the setting is named
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["network error"] * 3
    assert requests_booked(state)[FLASH]["requests"] == 3 and gw.open_run().model == FLASH


def test_a_per_day_429_moves_on_to_the_next_model_within_the_same_request(gateway, upstream):
    upstream.reply(api.per_day(), model=FLASH).reply(api.answer(NOTES), model=LITE)
    gw = gateway([FLASH, LITE])
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 200 and answer_of(response)["files"] == [{"path": p, "content": c} for p, c in NOTES]
    assert upstream.models_asked() == [FLASH, LITE]
    report = gw.close_run(plan.token)
    assert report.model == LITE and report.requests == 2 and report.answered and report.problem is None
    assert [call["kind"] for call in report.calls] == ["429 per day", "answer"]


def test_a_per_day_429_does_not_move_on_to_a_model_the_prompt_does_not_fit(gateway, upstream):
    upstream.reply(api.per_day(), model=FLASH)
    gw = gateway([FLASH, GEMMA])
    plan = gw.open_run()
    assert ask(gw, plan.token, seed_body("x" * 15_000 * 3)).status_code == 429
    assert upstream.models_asked() == [FLASH]
    problem = gw.close_run(plan.token).problem
    assert problem.kind == "wait" and seconds_from_now(problem.until) <= 0  # the next run, with Gemma's budget
    assert "over the budget of every model left" in problem.why
    assert gw.open_run().model == GEMMA


def test_a_model_that_answers_404_is_skipped_and_none_left_stops_with_one_line(gateway, upstream):
    upstream.reply(api.model_gone("gemini-2.5-flash-lite"))
    gw = gateway(["gemini-2.5-flash-lite"])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 403
    problem = gw.close_run(plan.token).problem
    assert problem.kind == "stop" and problem.why.startswith("no usable model: gemini-2.5-flash-lite: not found")
    assert "GEMINI_MODEL" in problem.why and "\n" not in problem.why
    gw.close()
    assert gateway(["gemini-2.5-flash-lite"]).open_run() == Plan(stop=problem.why)
    assert len(upstream.requests) == 1


# --- pacing -----------------------------------------------------------------------------------
def test_requests_are_paced_to_the_models_minute_remembered_across_restarts(gateway, upstream, state):
    old = time.time() - 59.6
    state.mkdir()
    (state / "quota.json").write_text(json.dumps({FLASH: {"recent": [[old, 250_000]]}}))  # a full minute of tokens
    sent_at = []
    upstream.reply(api.answer(NOTES), hook=lambda request: sent_at.append(time.time()))
    gw = gateway()
    plan = gw.open_run()  # the seed does not start before its model's minute has room for its whole budget
    assert abs(plan.wait_until.timestamp() - (old + ledger_module.WINDOW)) < 0.01 and "paced" in plan.why
    time.sleep(max(0.0, plan.wait_until.timestamp() - time.time()))
    plan = gw.open_run()
    assert plan.model == FLASH and ask(gw, plan.token).status_code == 200
    assert sent_at[0] >= old + 60 and gw.close_run(plan.token).calls[0]["kind"] == "answer"
    [booked] = json.loads((state / "quota.json").read_text())[FLASH]["recent"]
    assert booked[0] >= old + 60 and booked[1] > 0


def test_a_model_at_its_requests_a_minute_is_planned_after_the_minute(gateway, upstream, state):
    old = time.time() - 59.7
    state.mkdir()
    (state / "quota.json").write_text(json.dumps({FLASH: {"recent": [[old, 10]]}}))
    plan = gateway(limits=f"{FLASH}=1/250000/20").open_run()
    assert abs(plan.wait_until.timestamp() - (old + ledger_module.WINDOW)) < 0.01 and "paced" in plan.why
    assert upstream.requests == []


# --- learning ---------------------------------------------------------------------------------
def json_mode_left_out(body):
    return "responseMimeType" not in body.get("generationConfig", {}) and \
        "Answer with only the JSON object" in body["contents"][-1]["parts"][-1]["text"]


def system_instruction_folded(body):
    return "systemInstruction" not in body and body["contents"][0]["parts"][0]["text"].startswith(RULES)


@pytest.mark.parametrize("refusal, adapted", [
    ("JSON mode is not enabled for models/gemini-3.5-flash", json_mode_left_out),  # as recorded from Gemma 3
    ("Developer instruction is not enabled for models/gemini-3.5-flash", system_instruction_folded)])
def test_a_refused_feature_is_learned_retried_without_it_and_never_sent_again(gateway, upstream, refusal, adapted):
    upstream.reply(api.error(400, "INVALID_ARGUMENT", refusal)).reply(api.answer(NOTES)).reply(api.answer(NOTES))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["feature refused", "answer"]
    gw.close()
    again = gateway()
    assert ask(again, again.open_run().token).status_code == 200
    assert [adapted(request["body"]) for request in upstream.requests] == [False, True, True]


def test_a_429s_quota_value_corrects_the_table_until_the_setting_changes(gateway, upstream, said):
    upstream.reply(quota_error("GenerateContentInputTokensPerModelPerMinute-FreeTier", "30000", "0.1s"))
    upstream.reply(api.answer(NOTES))
    gw = gateway()
    plan = gw.open_run()
    assert plan.budget == 60_000 and ask(gw, plan.token).status_code == 200
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["429 per minute", "answer"]
    assert gw.open_run().budget == budget_for(30_000)
    gw.close()
    assert gateway().open_run().budget == budget_for(30_000)
    assert gateway(limits=f"{FLASH}=5/200000/20").open_run().budget == 60_000
    assert any("learned tpm = 30000" in line for line in said)


def test_a_prompt_over_a_minute_just_learned_is_not_sent_again(gateway, upstream):
    upstream.reply(quota_error("GenerateContentInputTokensPerModelPerMinute-FreeTier", "16000", "0.1s"))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token, seed_body("x" * 20_000 * 3))
    assert response.status_code == 429 and len(upstream.requests) == 1
    problem = gw.close_run(plan.token).problem
    assert problem.kind == "wait" and "over the budget of every model left" in problem.why
    plan = gw.open_run()  # the request it sent filled the minute it now knows
    assert "paced" in plan.why and 55 < seconds_from_now(plan.wait_until) <= ledger_module.WINDOW


def test_a_bare_429_is_a_per_minute_limit_of_a_minute(gateway, upstream):
    upstream.reply(api.error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."))
    gw = gateway(max_wait=1)
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 429 and response.json()["error"]["details"][0]["retryDelay"] in ("60s", "61s")
    report = gw.close_run(plan.token)
    assert report.problem.kind == "wait" and 59 < seconds_from_now(report.problem.until) <= 61
    assert [call["kind"] for call in report.calls] == ["429 without details"]


# --- answers ----------------------------------------------------------------------------------
def test_gemmas_json_in_a_fence_after_a_space_and_prose_comes_back_clean(gateway, upstream):
    payload = {"tasks": ["Add notes", "Keep them", "Test them"], "done": [1],
               "files": [{"path": "notes.py", "content": "NOTES = {}\n"}]}
    fenced = f" Here is the JSON you asked for:\n```json\n{json.dumps(payload, indent=2)}\n```\nI hope this helps."
    upstream.reply(api.text_answer(fenced, model=GEMMA))
    gw = gateway([GEMMA])
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 200
    [part] = response.json()["candidates"][0]["content"]["parts"]
    assert part["text"].startswith("{") and json.loads(part["text"]) == payload
    [sent] = upstream.requests
    assert json_mode_left_out(sent["body"]) and sent["body"]["systemInstruction"] == {"parts": [{"text": RULES}]}


def test_thought_parts_are_dropped(gateway, upstream):
    thinking = api.answer(NOTES)
    thinking["candidates"][0]["content"]["parts"][0]["text"] = 'A draft: {"tasks": ["draft"], "files": []}'
    upstream.reply(thinking)
    gw = gateway()
    response = ask(gw, gw.open_run().token)
    candidate = response.json()["candidates"][0]
    assert candidate["finishReason"] == "STOP" and candidate["content"]["parts"] == [
        {"text": json.dumps({"tasks": ["task one", "task two", "task three"], "done": [],
                             "files": [{"path": "notes.py", "content": NOTES[0][1]}]})}]


def test_the_files_that_came_whole_are_salvaged_from_an_answer_cut_off(gateway, upstream):
    cut = ('{"tasks": ["one", "two"], "files": [{"path": "a.py", "content": "A = 1\\n"}, '
           '{"path": "b.py", "content": "B = ')
    upstream.reply(api.text_answer(cut, "MAX_TOKENS"))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 200 and response.json()["candidates"][0]["finishReason"] == "STOP"
    assert answer_of(response) == {"tasks": ["one", "two"], "done": [],
                                   "files": [{"path": "a.py", "content": "A = 1\n"}]}
    report = gw.close_run(plan.token)
    assert report.salvaged == CUT_AT_THE_LIMIT and report.answered


def test_every_whole_file_is_salvaged_from_an_answer_broken_anywhere_and_the_parsers_error_said(gateway, upstream):
    """A 684-second answer with one bad escape in its first file (as Qwen2.5-Coder 1.5B wrote it) kept its two
    whole test files."""
    broken = ('```json\n{"tasks": ["Add notes"], "files": [{"path": "notes.py", "content": "print(\\\'hi\\\')\\n"}, '
              '{"path": "tests/test_a.py", "content": "def test_a():\\n    assert 1\\n"}, '
              '{"path": "tests/test_b.py", "content": "def test_b():\\n    assert 2\\n"}]}\n```')
    upstream.reply(api.text_answer(broken))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert [f["path"] for f in answer_of(response)["files"]] == ["tests/test_a.py", "tests/test_b.py"]
    salvaged = gw.close_run(plan.token).salvaged
    assert salvaged.startswith("not valid JSON: Invalid \\escape at line 2 column 75") and \
        salvaged.endswith("kept the 2 file(s) that came whole")


def test_an_unusable_answer_says_the_parsers_error_and_where(gateway, upstream):
    upstream.reply(api.text_answer('{"tasks": ["a"], "files": [{"path": "a.py", "content": """x = 1"""}]}'))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 502
    why = gw.close_run(plan.token).problem.why
    assert why.startswith("not valid JSON: Expecting ',' delimiter at line 1 column 58") and "cut off" not in why


@pytest.mark.parametrize("with_parts", [True, False])
def test_an_answer_cut_off_before_any_whole_file_is_unusable(gateway, upstream, state, with_parts):
    upstream.reply(api.max_tokens(with_parts))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 502
    report = gw.close_run(plan.token)
    assert report.problem.kind == "unusable" and "finishReason MAX_TOKENS" in report.problem.why
    assert not report.answered and requests_booked(state)[FLASH]["wasted"] == {"unusable answer": 1}


@pytest.mark.parametrize("body, why", [(api.blocked(), "prompt blocked (PROHIBITED_CONTENT)"),
                                       ({"weird": True}, "empty answer (finishReason None)")])
def test_a_blocked_or_strange_answer_is_unusable(gateway, upstream, body, why):
    upstream.reply(body)
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 502
    assert why in gw.close_run(plan.token).problem.why


def test_lazy_files_are_removed_and_listed(gateway, upstream):
    upstream.reply(api.answer([("notes.py", "def add(text):\n    return text\n"),
                               ("seed.py", "# ... existing code ...\ndef main():\n    pass\n"),
                               ("util.py", "X = 1\n# rest of the file unchanged\n"), ("empty.py", "")]))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert [item["path"] for item in answer_of(response)["files"]] == ["notes.py"]
    assert gw.close_run(plan.token).refused == (
        "seed.py: lazy: '# ... existing code ...' stands in for code it would drop",
        "util.py: lazy: '# rest of the file unchanged' stands in for code it would drop", "empty.py: empty")


@pytest.mark.parametrize("content", ["... existing code ...", "def main():\n    ...  # rest of the code unchanged\n",
                                     "x = 1\n/* ... remaining functions ... */\n", "# your code here\n"])
def test_a_lazy_placeholder_of_any_shape_is_dropped_and_an_answer_left_without_files_says_so(gateway, upstream,
                                                                                            content):
    """Qwen2.5-Coder 1.5B sent "... existing code ..." as a whole file, with no comment marker, three times."""
    upstream.reply(api.answer([("notes.py", content)]))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 502
    why = gw.close_run(plan.token).problem.why
    assert why.startswith("no file to write: the answer held 3 task(s) and 1 file(s); dropped: notes.py: lazy: ")


def test_the_rules_example_echoed_back_is_never_the_answer_and_its_path_never_lands(gateway, upstream):
    """Qwen2.5-Coder 0.5B answered with the example of the rules filled in: files relative/path and relative/path2
    landed."""
    rules = ('Answer with JSON: {"tasks": ["one"], "files": [{"path": "relative/path", "content": "the complete new '
             'text"}]}. Plan three tasks.')
    echo = ('{"tasks": ["one"], "files": [{"path": "relative/path", "content": "the complete new text"}]}\n'
            '{"tasks": ["two"], "files": [{"path": "relative/path2", "content": "the complete new text"}, '
            '{"path": "relative/path", "content": "x = 1"}]}')
    upstream.reply(api.text_answer(echo))
    gw = gateway()
    plan = gw.open_run()
    body = seed_body() | {"systemInstruction": {"parts": [{"text": rules}]}}
    assert ask(gw, plan.token, body).status_code == 502
    why = gw.close_run(plan.token).problem.why
    assert why == ("no file to write: the answer held 1 task(s) and 2 file(s); dropped: relative/path2: the "
                   "instructions' own text, sent back; relative/path: the instructions' example path, not a file of "
                   "the codebase")


# --- retries and stops ------------------------------------------------------------------------
def test_a_server_error_is_retried_and_the_answer_delivered(gateway, upstream):
    upstream.reply(api.overloaded()).reply(api.answer(NOTES))
    gw = gateway()
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["server error 503", "answer"]


def test_server_errors_are_retried_with_backoff_then_the_run_waits(gateway, upstream):
    times = []
    for _ in range(3):
        upstream.reply(api.overloaded(), hook=lambda request: times.append(time.monotonic()))
    gw = gateway(backoff=0.05)
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 503 and response.json()["error"]["details"][0]["retryDelay"] in ("300s", "299s")
    assert len(upstream.requests) == 3
    assert times[1] - times[0] >= 0.05 * 0.5 and times[2] - times[1] >= 0.05 * 2 * 0.5
    report = gw.close_run(plan.token)
    assert report.problem.kind == "wait" and 290 < seconds_from_now(report.problem.until) <= 300
    assert [call["kind"] for call in report.calls] == ["server error 503"] * 3


@pytest.mark.parametrize("key", [KEY, "proxy-" + uuid.uuid4().hex], ids=["google", "no known shape"])
def test_a_refused_key_stops_with_one_line_and_the_key_is_nowhere(gateway, upstream, state, said, key):
    refused = api.key_invalid(key)
    other = "AIzaSy" + "B" * 33  # a key-shaped string that is not the key
    refused["error"]["message"] += f" Invalid API key: {key} (not {other})"  # bodies can echo keys anywhere
    upstream.reply(refused)
    gw = gateway(key=key, requests_per_run=2)
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 403 and key not in response.text
    assert ask(gw, plan.token).status_code == 403  # asked no more, even within the run
    report = gw.close_run(plan.token)
    why = report.problem.why
    assert report.problem.kind == "stop" and why.startswith("Gemini refused this key") and "\n" not in why
    assert "GEMINI_API_KEY" in why and key not in json.dumps(report, default=str) and other not in why
    assert gw.open_run() == Plan(stop=why) and len(upstream.requests) == 1
    assert all(key.encode() not in path.read_bytes() for path in state.iterdir() if path.is_file())  # the record too
    assert key not in "\n".join(said)


def test_an_AQ_key_refused_as_if_it_were_an_oauth_token_is_explained(gateway, upstream):
    key = "AQ.Ab8RN6" + uuid.uuid4().hex
    upstream.reply(api.error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 "
                             "access token, login cookie or other valid authentication credential.", [
                                 {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                  "reason": "ACCESS_TOKEN_TYPE_UNSUPPORTED", "domain": "googleapis.com",
                                  "metadata": {"service": "generativelanguage.googleapis.com"}}]))
    gw = gateway(key=key)
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 403
    why = gw.close_run(plan.token).problem.why
    assert "is misleading" in why and "https://aistudio.google.com/apikey" in why and key not in why
    assert upstream.requests[0]["headers"]["x-goog-api-key"] == key


# --- the ledger -------------------------------------------------------------------------------
def test_the_ledger_counts_every_request_exactly_even_when_the_seed_hangs_up(gateway, upstream, state):
    today = datetime.now(PACIFIC).date()
    at_send = []
    upstream.reply(api.answer(NOTES))
    upstream.reply(api.answer(NOTES), delay=0.6,
                   hook=lambda request: at_send.append(requests_booked(state)[FLASH]["requests"]))
    gw = gateway()
    plan = gw.open_run()
    with contextlib.closing(sqlite3.connect(state / "record.sqlite")) as db, db:  # a year of requests, 20 a day
        db.executemany("INSERT INTO requests (day, model, kind) VALUES (?, ?, 'answer')",
                       [(f"{today - timedelta(days=back)}", FLASH) for back in range(1, 366) for _ in range(20)])
    assert ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    plan = gw.open_run()
    with pytest.raises(requests.exceptions.ReadTimeout):
        ask(gw, plan.token, timeout=0.2)
    report = gw.close_run(plan.token)  # waits for the request still under way upstream
    assert at_send == [2] and report.requests == 1 and report.calls[0]["kind"] == "answer"
    assert requests_booked(state) == {FLASH: {"requests": 2, "prompt": 2400, "output": 600, "thinking": 300,
                                              "kinds": {"answer": 2}, "wasted": {}}}
    assert requests_booked(state, f"{today - timedelta(days=365)}")[FLASH]["requests"] == 20


def record_rows(state):
    """(kind, prompt tokens, wasted, iteration) of each request in the record, as it left."""
    with contextlib.closing(sqlite3.connect(state / "record.sqlite")) as db:
        return db.execute("SELECT kind, prompt_tokens, wasted, iteration FROM requests ORDER BY id").fetchall()


def held_by_a_person(state, seconds, taken):
    """A person's `sqlite3 backups/record.sqlite` with BEGIN IMMEDIATE left open for `seconds` (`taken` is set once
    it holds the lock)."""
    def hold():
        with contextlib.closing(sqlite3.connect(state / "record.sqlite", isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            taken.set()
            time.sleep(seconds)
            db.execute("ROLLBACK")
    threading.Thread(target=hold, daemon=True).start()
    taken.wait(5)


def test_a_record_a_person_holds_locked_never_costs_an_answer_and_nothing_is_sent_that_cannot_be_counted(
        gateway, upstream, state):
    """The attack: a person's sqlite3 shell holds the record's write lock. While the model answers, the answer still
    reaches the seed (its request stays counted as it left); before a request leaves, nothing is sent, so nothing
    the record cannot count is spent."""
    gw = gateway()
    gw.sent.busy = 0.3  # the keeper waits 5 s for such a lock
    plan = gw.open_run()
    upstream.reply(api.answer(NOTES), hook=lambda request: held_by_a_person(state, 1.0, threading.Event()))
    assert answer_of(ask(gw, plan.token)) == {"tasks": ["task one", "task two", "task three"], "done": [],
                                               "files": [{"path": "notes.py", "content": NOTES[0][1]}]}
    gw.close_run(plan.token)
    time.sleep(1.0)
    assert record_rows(state) == [("no answer", 0, None, None)]  # counted against the day; its row makes it whole
    plan = gw.open_run()
    held_by_a_person(state, 1.0, threading.Event())
    refused = ask(gw, plan.token)
    assert refused.status_code == 503 and "the request was not sent: backups/record.sqlite cannot be written (" \
        "database is locked; a sqlite3 shell holding a write on it?)" in refused.text
    assert len(upstream.requests) == 1 and len(record_rows(state)) == 1


def test_a_request_that_comes_back_after_its_run_closed_keeps_what_it_came_back_as(gateway, upstream, state):
    """--timeout while the model answers, the gateway's wait for it over: the answer that comes back after is kept
    as it came (its tokens, its kind, wasted: the run never had it), whether its row is written before or after."""
    record = load_keeper("record")
    for row_first in (False, True):
        gw = gateway()
        book = record.Writer(state / "record.sqlite")
        plan = gw.open_run()
        upstream.reply(api.answer(NOTES), delay=1.0)
        asking = threading.Thread(target=lambda: ask(gw, plan.token, timeout=30))
        asking.start()
        while len(upstream.requests) < 1 + row_first:
            time.sleep(0.01)
        report = gw.close_run(plan.token, linger=0)
        row = {**dict.fromkeys(record.COLUMNS), "number": 1 + row_first, "kind": "stopped", "outcome": "stopped",
               "requests": report.requests, "model": FLASH}
        if row_first:
            book.write(row, report.calls)
        asking.join()
        if not row_first:
            book.write(row, report.calls)
        book.db.close()
        assert record_rows(state)[-1] == ("answer", 1200, "no answer", 1 + row_first)
    assert requests_booked(state)[FLASH]["requests"] == 2


def test_a_run_that_ends_while_its_request_moves_on_to_the_next_model_sends_nothing_more(gateway, upstream, state):
    """The model says its day is spent after the run ended (--timeout): the request would move on to the next
    model, for a run nobody waits for; it is never sent."""
    upstream.reply(api.per_day(), delay=1.0)
    gw = gateway([FLASH, LITE])
    plan = gw.open_run()
    asking = threading.Thread(target=lambda: ask(gw, plan.token, timeout=30))
    asking.start()
    while not upstream.requests:
        time.sleep(0.01)
    gw.close_run(plan.token, linger=0)
    asking.join()
    assert [request["model"] for request in upstream.requests] == [FLASH]
    assert requests_booked(state) == {FLASH: {"requests": 1, "prompt": 0, "output": 0, "thinking": 0,
                                              "kinds": {"429 per day": 1}, "wasted": {"429 per day": 1}}}


# --- the door checks before it reads (issue 18, item 7) ---------------------------------------------
def post_raw(gw, head, body=b""):
    """Send a request by hand (a declared length need not be sent) and read the status line."""
    with socket.create_connection(gw.server.server_address, timeout=5) as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        return sock.recv(65536).split(b"\r\n", 1)[0].decode()


def test_the_token_is_checked_before_a_body_is_read_and_a_huge_body_is_never_read(gateway, upstream, state):
    gw = gateway()
    plan = gw.open_run()
    path = f"POST /v1beta/models/{FLASH}:generateContent HTTP/1.1\r\nHost: x\r\nContent-Length: {2 ** 30}"
    started = time.monotonic()
    assert post_raw(gw, f"{path}\r\nx-goog-api-key: wrong").endswith("401 Unauthorized")
    assert post_raw(gw, f"{path}\r\nx-goog-api-key: {plan.token}").endswith("413 Request Entity Too Large")
    assert time.monotonic() - started < 2 and upstream.requests == [] and requests_booked(state) == {}


@pytest.mark.parametrize("body, says", [
    (seed_body() | {"contents": [{"role": "user", "parts": [{"text": "hi"}, {"inlineData": {
        "mimeType": "application/octet-stream", "data": "QUFB" * 1000}}]}]}, "only text parts"),
    (seed_body(candidateCount=8), "candidateCount must be 1"),
    (seed_body(candidate_count=8), "candidateCount must be 1"),
    (seed_body(thinking_config={"thinking_budget": 0}), "thinking_config is not a field the gateway sends on"),
    (seed_body(thinkingConfig={"thinkingBudget": 0}), "thinkingConfig is not a field the gateway sends on"),
    (seed_body(temperature=0.2, **{"tempera_ture": 1}), "tempera_ture is not a field"),
    (seed_body() | {"tools": [{"codeExecution": {}}]}, "tools is not a field the gateway sends on"),
    (seed_body() | {"safety_settings": []}, "safety_settings is not a field the gateway sends on"),
    (seed_body() | {"contents": [{"role": "user", "parts": [{"text": "hi"}], "cachedContent": "x"}]},
     "contents[].cachedContent is not a field"),
    (seed_body(max_output_tokens=10, maxOutputTokens=10), "maxOutputTokens is given twice"),
    (seed_body(responseSchema={"type": "OBJECT", "description": "x" * 1_500_000}), "responseSchema is over 8,000"),
    (seed_body(responseMimeType="text/x-shellscript"), "responseMimeType must be one of")],
    ids=["inline-data", "candidate-count", "candidate-count-snake", "thinking-snake", "thinking", "unknown-setting",
         "tools", "safety", "cached-content", "both-spellings", "huge-schema", "mime-type"])
def test_what_the_seed_may_not_ask_is_refused_and_never_forwarded(gateway, upstream, body, says):
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token, body)
    assert response.status_code == 400 and says in response.json()["error"]["message"] and upstream.requests == []


@pytest.mark.parametrize("name", ["maxOutputTokens", "max_output_tokens"])
def test_an_output_limit_above_any_models_is_clamped_and_sent_in_one_spelling(gateway, upstream, name):
    upstream.reply(api.answer(NOTES))
    gw = gateway()
    assert ask(gw, gw.open_run().token, seed_body(**{name: 10 ** 7})).status_code == 200
    assert upstream.requests[0]["body"]["generationConfig"] == {
        "responseMimeType": "application/json", "responseSchema": SCHEMA, "maxOutputTokens": answers.MAX_OUTPUT}


def test_every_byte_of_the_request_counts_toward_the_budget(gateway, upstream):
    """A schema, a system instruction or settings are sent too: 1.5 MB of responseSchema went upstream against a
    budget of ~175 KB before."""
    gw = gateway(prompt_tokens=5_000)
    plan = gw.open_run()
    schema = {"type": "OBJECT", "description": "x" * 7_000}
    body = seed_body("# Goal\n" + "y" * 8_000, responseSchema=schema)
    response = ask(gw, plan.token, body | {"systemInstruction": {"parts": [{"text": "z" * 1_000}]}})
    assert response.status_code == 400 and "over this run's budget of 5,000" in response.json()["error"]["message"]
    assert upstream.requests == []


def test_an_answer_over_the_cap_is_not_read_whole(gateway, upstream):
    upstream.reply(api.text_answer("x" * (9 * 2 ** 20)))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 502 and "over 8 MB: not read" in response.json()["error"]["message"]
    assert gw.close_run(plan.token).calls[0]["kind"] == "unusable answer"


def test_the_v1_path_of_googles_sdk_is_served_as_v1beta(gateway, upstream):
    upstream.reply(api.answer(NOTES))
    gw = gateway()
    response = requests.post(f"{gw.url}/v1/models/{FLASH}:generateContent", json=seed_body(),
                             headers={"x-goog-api-key": gw.open_run().token}, timeout=30)
    assert response.status_code == 200 and answer_of(response)["files"][0]["path"] == "notes.py"


def test_many_idle_connections_do_not_each_hold_a_thread(gateway):
    gw = gateway()
    before = threading.active_count()
    idle = [socket.create_connection(gw.server.server_address) for _ in range(100)]
    try:
        time.sleep(0.5)
        assert threading.active_count() - before <= door.MAX_CONNECTIONS
    finally:
        for sock in idle:
            sock.close()


def test_an_answer_nested_deeper_than_python_reads_is_the_answers_fault_never_the_gateways(gateway, upstream):
    """The red team's answer of 100,000 open brackets: unusable, said as such (it read 'the gateway failed:
    RecursionError', blaming the keeper)."""
    upstream.reply(api.text_answer('{"tasks": ["a"], "files": ' + "[" * 100_000))
    gw = gateway()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 502 and "nested deeper than can be read" in response.text, response.text[:300]
    assert "gateway failed" not in response.text
