"""Backends as real servers answer, end to end through `python fallback.py`: each way the loop got stuck against
LiteLLM's proxy and llama-cpp-python's server (bench/real_servers.py runs both for real), and the gateway's
other findings, against fakes whose bodies are the real servers' own.

The bodies below were recorded from the real servers by bench/real_servers.py (LiteLLM 1.108.7's proxy with
mock_response models and a master key; llama-cpp-python 0.3.36's server on a GGUF of random weights):
- LiteLLM: /v1/models lists a model's max_input_tokens only when its config sets model_info; /v1/model/info
  says it per model; an unknown model is a 400 "Invalid model name passed in model=..."; a wrong key is a 400
  "No connected db." (no database behind the proxy); no key at all is a plain-text 500 "Internal Server Error".
- llama-cpp-python: /v1/models says no context and there is no /props; response_format json_schema is refused
  with a 500 naming "Input should be 'text' or 'json_object'"; a prompt over its context (2,048 by default) is a
  400 "This model's maximum context length is N tokens. ...".
"""
import json
import re
import time

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_fallback import outcomes, run_fallback
from test_openai_compatible import QWEN, FakeServer, llama_cpp, ollama, ollama_answer

MOCK, TINY = "mock-coder", "tiny"
LITELLM_MODELS = {"data": [{"id": MOCK, "object": "model", "created": 1677610602, "owned_by": "openai"}],
                  "object": "list"}
LITELLM_INFO = {"data": [{"model_name": MOCK, "litellm_params": {"model": "openai/mock-coder"},
                          "model_info": {"id": "a8f1d3dfb00bce33", "db_model": False, "max_input_tokens": 32768,
                                         "key": "openai/mock-coder", "max_tokens": None}}]}
LITELLM_UNKNOWN = {"error": {"message": "/chat/completions: Invalid model name passed in model=nope. Call `/v1/models` "
                             "to view available models for your key.", "type": "invalid_request_error",
                             "param": None, "code": "400"}}
LITELLM_NO_DB = {"error": {"message": "No connected db.", "type": "no_db_connection", "param": None, "code": "400"}}
LLAMA_PY_MODELS = {"object": "list", "data": [{"id": TINY, "object": "model", "owned_by": "me", "permissions": []}]}
LLAMA_PY_REFUSED = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                              "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                              "'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File "
                              "\"llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST "
                              "/v1/chat/completions", "type": "internal_server_error", "param": None, "code": None}}
LLAMA_PY_OVERFLOW = {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested "
                               "6596 tokens (3319 in the messages, 3277 in the completion). Please reduce the length "
                               "of the messages or completion.", "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}}


def litellm_answer(content):
    return {"id": "chatcmpl-ed9f8743", "created": 1795525889, "model": MOCK, "object": "chat.completion",
            "choices": [{"finish_reason": "stop", "index": 0, "message": {"content": content, "role": "assistant"}}],
            "usage": {"completion_tokens": 20, "prompt_tokens": 10, "total_tokens": 30}}


def llama_py_answer(content):
    return {"id": "chatcmpl-985cf1aa", "object": "chat.completion", "created": 1795526234, "model": TINY,
            "choices": [{"index": 0, "message": {"content": content, "role": "assistant"}, "logprobs": None,
                         "finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 8,
                                                              "total_tokens": 20}}


def litellm(info=True):
    routes = {("GET", "/v1/models"): (200, LITELLM_MODELS), ("GET", "/models"): (200, LITELLM_MODELS)}
    return {**routes, ("GET", "/v1/model/info"): (200, LITELLM_INFO)} if info else routes


def llama_cpp_python():
    return {("GET", "/v1/models"): (200, LLAMA_PY_MODELS)}


@pytest.fixture
def servers():
    made = []

    def make(routes=(), server=FakeServer):
        made.append(server(routes))
        return made[-1]

    yield make
    for server in made:
        server.close()


def local_env(env, workspace, base, model, **settings):
    """The user's .env for a server of their own: no Gemini key."""
    del env["GEMINI_API_KEY"]
    lines = [f"OPENAI_BASE_URL={base}", f"OPENAI_MODEL={model}", *(f"{k}={v}" for k, v in settings.items())]
    (workspace / ".env").write_text("\n".join(lines) + "\n")


def change(path="notes.py", text="NOTES = []\n"):
    return json.dumps({"tasks": ["Add notes", "Keep them", "Test them"], "done": [],
                       "files": [{"path": path, "content": text}]})


def stop_line(done):
    """The one line a stop ends with, on the console."""
    return [line for line in done.stdout.splitlines() if " stopped: " in line][-1]


# --- the three stuck modes --------------------------------------------------------------------------
def test_llama_cpp_python_refusing_json_schema_with_a_500_is_learned_and_the_change_lands(workspace, env, servers):
    server = servers(llama_cpp_python()).answer(LLAMA_PY_REFUSED, 500).answer(llama_py_answer(change()))
    local_env(env, workspace, server.base, TINY, OPENAI_CONTEXT_TOKENS=16384)
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout
    first, second = [chat["body"] for chat in server.chats()]
    assert first["response_format"]["type"] == "json_schema" and "response_format" not in second
    assert "It follows this schema" in second["messages"][-1]["content"]


def test_a_server_that_does_not_say_its_context_stops_naming_the_setting_with_a_value_that_works(workspace, env,
                                                                                                servers):
    server = servers(llama_cpp_python())
    local_env(env, workspace, server.base, TINY)
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 78 and server.chats() == []
    value = re.search(r"set OPENAI_CONTEXT_TOKENS=(\d+) in \.env", stop_line(done))
    assert value and "shorten them" in stop_line(done), done.stdout
    server.answer(llama_py_answer(change()))
    local_env(env | {"GEMINI_API_KEY": "x"}, workspace, server.base, TINY, OPENAI_CONTEXT_TOKENS=value.group(1))
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0 and outcomes(workspace)[-1] == "landed: 1 file(s) changed", done.stdout


def test_litellm_says_the_context_at_model_info_and_the_change_lands(workspace, env, servers):
    server = servers(litellm()).answer(litellm_answer(change()))
    local_env(env, workspace, server.base, MOCK, OPENAI_API_KEY="sk-bench-1234")
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout
    [chat] = server.chats()
    assert chat["body"]["max_tokens"] == 32768 - int(32768 * 0.6)
    assert chat["headers"]["authorization"] == "Bearer sk-bench-1234"


class OllamaJustStarted(FakeServer):
    """Ollama as the README starts it: the model pulled, not loaded (/api/ps lists nothing) until a request loads it."""

    def reply_to(self, method, path):
        if (method, path) == ("POST", "/api/generate"):
            self.routes.update(ollama(running=16384))
            return 200, {"model": QWEN, "created_at": "2026-11-24T13:00:00Z", "response": "", "done": True,
                         "done_reason": "load"}
        return super().reply_to(method, path)


def test_ollama_just_started_is_asked_to_load_the_model_and_its_context_is_used(workspace, env, servers):
    server = servers(ollama(), server=OllamaJustStarted).answer(ollama_answer(change()))
    local_env(env, workspace, server.base, QWEN)
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout
    assert server.chats()[0]["body"]["max_tokens"] == 16384 - int(16384 * 0.6)
    assert [r for r in server.requests if r["path"] == "/api/generate"][0]["body"] == {"model": QWEN}


def test_a_model_litellm_does_not_have_stops_with_one_line_naming_models(workspace, env, servers):
    server = servers(litellm(info=False)).answer(LITELLM_UNKNOWN, 400)
    local_env(env, workspace, server.base, MOCK, OPENAI_API_KEY="sk-bench-1234", OPENAI_CONTEXT_TOKENS=16384)
    done = run_fallback(workspace, env, "--iterations", "3", timeout=60)
    assert done.returncode == 78 and len(server.chats()) == 1, done.stdout
    assert "Invalid model name" in stop_line(done) and "python fallback.py --models" in stop_line(done)


def test_a_model_the_server_does_not_list_stops_naming_models_before_a_request(workspace, env, servers):
    server = servers(litellm())
    local_env(env, workspace, server.base, "nope", OPENAI_API_KEY="sk-bench-1234")
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 78 and server.chats() == [], done.stdout
    assert "does not list nope (it has mock-coder)" in stop_line(done) and "--models" in stop_line(done)


# --- the other findings -------------------------------------------------------------------------------
@pytest.mark.parametrize("key, status, body", [("sk-wrong", 400, LITELLM_NO_DB),
                                               (None, 500, "Internal Server Error")], ids=["wrong", "missing"])
def test_a_key_litellm_refuses_stops_naming_the_key_before_a_request_is_spent(workspace, env, servers, key, status,
                                                                             body):
    server = servers({route: (status, body) for route in litellm()})
    local_env(env, workspace, server.base, MOCK, OPENAI_CONTEXT_TOKENS=16384, **({"OPENAI_API_KEY": key} if key else {}))
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 78 and server.chats() == [], done.stdout
    assert "set OPENAI_API_KEY in .env" in stop_line(done) and (not key or key not in stop_line(done))
    listed = run_fallback(workspace, env, "--models", timeout=60)
    assert listed.returncode == 78 and "set OPENAI_API_KEY" in listed.stderr and "OPENAI_BASE_URL" not in listed.stderr


def test_a_wrong_key_in_a_chat_answer_stops_too(workspace, env, servers):
    server = servers(litellm(info=False)).answer(LITELLM_NO_DB, 400)
    local_env(env, workspace, server.base, MOCK, OPENAI_API_KEY="sk-bench-1234", OPENAI_CONTEXT_TOKENS=16384)
    done = run_fallback(workspace, env, "--iterations", "3", timeout=60)
    assert done.returncode == 78 and len(server.chats()) == 1 and "set OPENAI_API_KEY" in stop_line(done)


def test_a_context_an_overflow_states_is_learned_and_the_advice_is_what_the_server_can_give(workspace, env, servers):
    server = servers(llama_cpp_python()).answer(LLAMA_PY_OVERFLOW, 400)
    local_env(env, workspace, server.base, TINY, OPENAI_CONTEXT_TOKENS=16384)
    done = run_fallback(workspace, env, "--iterations", "3", timeout=60)
    assert done.returncode == 78 and len(server.chats()) == 1, done.stdout
    assert "a context of 2,048 tokens" in stop_line(done) and "`--n_ctx 8192`" in stop_line(done)


def test_overflow_advice_never_exceeds_the_models_own_maximum(workspace, env, servers):
    trained = llama_cpp(n_ctx=16384)
    trained[("GET", "/v1/models")][1]["data"][0]["meta"]["n_ctx_train"] = 16384
    over = {"error": {"code": 400, "message": "request (20412 tokens) exceeds the available context size (16384 "
                      "tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 20412,
                      "n_ctx": 16384}}
    server = servers(trained).answer(over, 400)
    local_env(env, workspace, server.base, "qwen3-8b")
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 78 and "that is the model's own maximum" in stop_line(done), done.stdout
    assert "32768" not in stop_line(done)


def test_every_wait_inside_the_gateway_says_why_on_a_console_that_is_not_a_terminal(workspace, env, gemini):
    gemini.reply(api.overloaded()).reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert re.search(r"gateway: gemini-3\.5-flash: answered 503 UNAVAILABLE: The model is overloaded.*; waiting "
                     r"\d+\.\d s", done.stdout), done.stdout


def test_a_spent_day_wrapped_in_a_list_is_not_retried(workspace, env, gemini):
    gemini.reply(api.wrapped(api.per_day()))
    done = run_fallback(workspace, env, "--iterations", "1", timeout=30)
    assert done.returncode == 0 and len(gemini.requests) == 1
    assert re.fullmatch(r"waiting until \d{4}-\d\d-\d\d 0[78]:00 UTC", outcomes(workspace)[0])


# --- the seed's time is its own -------------------------------------------------------------------------
def test_a_retry_wait_inside_a_run_extends_its_time_limit(workspace, env, gemini):
    gemini.reply(api.per_minute("3s")).reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1", "--timeout", "2.5")
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout
    assert len(gemini.requests) == 2


def test_a_full_minute_is_waited_out_before_the_seed_starts(workspace, env, gemini):
    (workspace / "backups").mkdir()
    full = [[time.time() - 58, 10_000_000]]  # the test models' whole minute of input tokens, 58 s ago
    (workspace / "backups" / "quota.json").write_text(json.dumps({"gemini-3.5-flash": {"recent": full}}))
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "2", "--timeout", "2")
    assert done.returncode == 0, done.stdout
    first, second = outcomes(workspace)
    assert first.startswith("waiting until") and second == "landed: 1 file(s) changed"
    assert "paced to" in done.stdout and len(gemini.requests) == 1


def test_every_backend_is_what_the_gateway_uses_and_the_first_whose_settings_are_present_serves():
    backends = load_keeper("backends")
    local = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "qwen", "GEMINI_API_KEY": "k" * 39}
    assert backends.chosen(local).__name__.endswith("openai_compatible")
    assert backends.chosen({"GEMINI_API_KEY": "k" * 39}).__name__.endswith("gemini")
    for environ in (local, {"GEMINI_API_KEY": "k" * 39, "GEMINI_MODEL": "gemini-3.5-flash"}):
        made = backends.chosen(environ).from_env(environ)
        assert isinstance(made, backends.Backend), type(made)
    assert not isinstance(object(), backends.Backend)  # the check has teeth: a stand-in without them is refused
