"""The gateway to an OpenAI-compatible server, through its real boundaries: a fake server on loopback, a real
OpenAICompatibleGateway, a client POSTing Gemini-shaped requests as the seed does. None needs the network.

The fake's bodies are written out here from the servers' own code, tests and docs, and from recorded errors:
- Ollama (ollama/ollama): openai/openai.go (ToChatCompletion: "chatcmpl-N", system_fingerprint "fp_ollama", the
  message's `reasoning`, usage; ListCompletion; NewError: a 404 is a not_found_error, code null),
  server/routes.go (404 'model %q not found, try pulling it first'), middleware/openai.go (writeError wraps it
  as {"error": {...}}), middleware/openai_test.go (finish_reason "length"), docs/api.md (/api/show: parameters,
  model_info "<arch>.context_length"; /api/ps), api/types.go ProcessModelResponse and docs/context-length.mdx
  (/api/ps context_length, the CONTEXT that `ollama ps` shows; 4k by default under 24 GiB of VRAM).
- llama.cpp (ggml-org/llama.cpp): tools/server/tests/unit/test_chat_completion.py (an id holding "cmpl", a
  system_fingerprint "b<build>", usage, finish_reason "length", exceed_context_size_error with n_prompt_tokens
  and n_ctx), tools/server/tests/unit/test_basic.py (/props default_generation_settings.n_ctx per slot,
  total_slots, model_path; /models). Its 503 "Loading model" unavailable_error is the body its clients' tests
  record; its reasoning_content field: lacerbi/genai-lite docs/dev/2025-10-17_llamacpp-reasoning-extraction.md.
- vLLM's /v1/models entry with max_model_len (as recorded in deployment logs), LM Studio's /api/v1/models
  (lmstudio-ai/docs 1_developer/2_rest/list.md) and its errors as a bare string (lmstudio-ai/lmstudio-bug-tracker
  #169 and #307; bhimrazy/receipt-ocr#20); OpenAI's own refusal of response_format (openai/openai-dotnet#276).
"""
import itertools
import json
import re
import socket
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import fake_gemini as api
from conftest import load_keeper, requests_booked
from fake_gemini import FakeGemini
# The seed's request, the client and the keeper's package loaded by its path, as the Gemini gateway's tests have them
from test_gateway import (CUT_AT_THE_LIMIT, RULES, SCHEMA, answer_of, answers, ask, gateway_module, gemini,
                          seconds_from_now)

local, backends = (load_keeper(name) for name in ("openai_compatible", "backends"))
Plan, Problem, Trouble = (getattr(load_keeper("outcomes"), name) for name in ("Plan", "Problem", "Trouble"))
QWEN, LLAMA_CPP, VLLM, GEMMA = "qwen3:8b", "qwen3-8b", "Qwen/Qwen2.5-7B-Instruct", "google/gemma-4-26b-a4b"
GOAL = "# Goal\nGrow notes.py."  # the prompt of test_gateway.seed_body
# OpenAI's strict mode: every object lists each of its properties as required, and allows no others
JSON_SCHEMA = {"type": "object", "required": ["tasks", "done", "files"], "additionalProperties": False, "properties": {
    "tasks": {"type": "array", "items": {"type": "string"}}, "done": {"type": "array", "items": {"type": "integer"}},
    "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"},
                                                                        "content": {"type": "string"}},
                                         "required": ["path", "content"], "additionalProperties": False}}}}
PAYLOAD = {"tasks": ["Add notes", "Keep them", "Test them"], "done": [1],
           "files": [{"path": "notes.py", "content": "NOTES = {}\n"}]}
DRAFT = '{"tasks": ["draft"], "files": [{"path": "draft.py", "content": "x"}]}'


# --- the fake server ------------------------------------------------------------------------------
class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1:0: chat answers served in order, other paths fixed, requests kept."""

    def __init__(self, routes=()):
        self.routes, self.answers, self.requests = dict(routes), deque(), []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def answer(self, body, status=200):
        self.answers.append((status, body))
        return self

    def chats(self):
        return [request for request in self.requests if request["path"] == "/v1/chat/completions"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def reply_to(self, method, path):
        if (method, path) == ("POST", "/v1/chat/completions"):
            return self.answers.popleft() if self.answers else (500, {"error": {"message": "fake: no answer queued"}})
        return self.routes.get((method, path), (404, "404 page not found"))  # Ollama's, in plain text

    def handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.serve("GET")

            def do_POST(self):
                self.serve("POST")

            def serve(self, method):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests.append({"method": method, "path": self.path, "body": json.loads(data or b"null"),
                                      "headers": {k.lower(): v for k, v in self.headers.items()}})
                status, body = fake.reply_to(method, self.path)
                if isinstance(body, Stream):
                    return body.send(self)
                text = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args):
                pass

        return Handler


# --- bodies, in the shapes the servers send -------------------------------------------------------
def ollama(running=None, num_ctx=None, maximum=40960):
    """Ollama's side paths for QWEN: /api/show (docs/api.md), /api/ps (its context_length once loaded), /v1/models."""
    parameters = ('repeat_penalty                 1\nstop                           "<|im_start|>"\n'
                  'stop                           "<|im_end|>"\ntemperature                    0.6')
    show = {"modelfile": "# Modelfile generated by \"ollama show\"\nFROM /root/.ollama/models/blobs/sha256-a3de86",
            "parameters": f"num_ctx                        {num_ctx}\n{parameters}" if num_ctx else parameters,
            "template": "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}",
            "details": {"parent_model": "", "format": "gguf", "family": "qwen3", "families": ["qwen3"],
                        "parameter_size": "8.2B", "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "qwen3", "general.parameter_count": 8190735360,
                           "qwen3.block_count": 36, "qwen3.context_length": maximum, "qwen3.embedding_length": 4096},
            "capabilities": ["completion", "tools", "thinking"]}
    loaded = [{"name": QWEN, "model": QWEN, "size": 6654289920, "digest": "500a1f067a9f782620b40bee6f7b0c89e17ae61f6"
               "86b92c24933e4ca4b2b8b41", "details": show["details"], "expires_at": "2026-11-22T10:14:05.218Z",
               "size_vram": 6654289920, "context_length": running}] if running else []
    models = {"object": "list", "data": [{"id": QWEN, "object": "model", "created": 1763800000, "owned_by": "library"},
                                         {"id": "llama3.2:latest", "object": "model", "created": 1763700000,
                                          "owned_by": "library"}]}
    return {("POST", "/api/show"): (200, show), ("GET", "/api/ps"): (200, {"models": loaded}),
            ("GET", "/v1/models"): (200, models)}


def llama_cpp(n_ctx=8192):
    """llama-server's /props (n_ctx of each slot) and /v1/models (its one model, under its alias)."""
    props = {"default_generation_settings": {"id": 0, "n_ctx": n_ctx, "params": {"seed": 42, "n_predict": -1}},
             "total_slots": 1, "model_path": "models/Qwen3-8B-Q4_K_M.gguf", "build_info": "b6750-5bdd3ab5"}
    models = {"object": "list", "data": [{"id": LLAMA_CPP, "object": "model", "created": 1763800000,
                                          "owned_by": "llamacpp", "meta": {"vocab_type": 2, "n_vocab": 151936,
                                                                           "n_ctx_train": 40960, "n_embd": 4096}}]}
    return {("GET", "/props"): (200, props), ("GET", "/v1/models"): (200, models)}


def vllm(max_model_len=32768):
    models = {"object": "list", "data": [{"id": VLLM, "object": "model", "created": 1790147847, "owned_by": "vllm",
                                          "root": VLLM, "parent": None, "max_model_len": max_model_len,
                                          "permission": [{"id": "modelperm-aedd9ed3e5e55381",
                                                          "object": "model_permission", "allow_sampling": True}]}]}
    return {("GET", "/v1/models"): (200, models)}


def lm_studio(loaded=None):
    """LM Studio's /api/v1/models: the context a loaded instance runs with, and the model's maximum."""
    instances = [{"id": GEMMA, "config": {"context_length": loaded, "eval_batch_size": 512, "parallel": 4}}]
    model = {"type": "llm", "publisher": "google", "key": GEMMA, "display_name": "Gemma 4 26B A4B",
             "architecture": "gemma4", "loaded_instances": instances if loaded else [], "max_context_length": 262144,
             "format": "gguf"}
    return {("GET", "/api/v1/models"): (200, {"models": [model]}),
            ("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": GEMMA, "object": "model",
                                                                      "owned_by": "organization_owner"}]})}


def bare():
    """A server that says nothing about contexts: only the OpenAI model list."""
    return {("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": QWEN, "object": "model"}]})}


class Stream:
    """A streamed chat completion as llama-cpp-python 0.3.36 sent it to bench/real_model.py (sse_starlette, its
    `sep="\\n"`): a ping comment, a role event, one event per token, a last one with the finish reason, then [DONE]
    (no usage); `pause` seconds between events. Keeps how many events went out before the client hung up."""

    def __init__(self, pieces, finish="stop", pause=0.0, events=True):
        self.pieces, self.finish, self.pause, self.sent, self.hung_up = pieces, finish, pause, 0, threading.Event()
        self.events = events  # False: its ping alone, as when the server fails before its first token

    def event(self, delta, finish=None):
        chunk = {"id": "chatcmpl-682b95d6-8d5d-492c-b925-ca6ba59b1e99", "model": "qwen2.5-coder-1.5b",
                 "created": 1795636956, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def send(self, handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.end_headers()
        ping = b": ping - 2026-11-25 20:02:51.122951+00:00\n\n"  # sse_starlette's, first and every 15 s
        events = [ping, self.event({"role": "assistant"})], (self.event({"content": p}) for p in self.pieces)
        try:
            for event in itertools.chain(*events, [self.event({}, self.finish), b"data: [DONE]\n\n"]) \
                    if self.events else [ping]:
                handler.wfile.write(event)
                handler.wfile.flush()
                self.sent += 1
                time.sleep(self.pause)
        except OSError:
            self.hung_up.set()


def ollama_answer(content, finish="stop", reasoning=None):
    """Ollama's chat completion (openai/openai.go ToChatCompletion)."""
    message = {"role": "assistant", "content": content, **({"reasoning": reasoning} if reasoning else {})}
    return {"id": "chatcmpl-518", "object": "chat.completion", "created": 1736868357, "model": QWEN,
            "system_fingerprint": "fp_ollama", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1845, "completion_tokens": 402, "total_tokens": 2247}}


def llama_cpp_answer(content, finish="stop", reasoning_content=None, usage=None):
    """llama-server's chat completion (tools/server/tests/unit/test_chat_completion.py's assertions)."""
    message = {"role": "assistant", "content": content,
               **({"reasoning_content": reasoning_content} if reasoning_content else {})}
    return {"choices": [{"finish_reason": finish, "index": 0, "message": message}], "created": 1763800000,
            "model": LLAMA_CPP, "system_fingerprint": "b6750-5bdd3ab5", "object": "chat.completion",
            "usage": usage or {"completion_tokens": 512, "prompt_tokens": 1845, "total_tokens": 2357},
            "id": "chatcmpl-Xq3pvLqJ0ZxBbq5DkPuY8bT1dAN4sE2z",
            "timings": {"prompt_n": 1845, "prompt_ms": 2101.5, "predicted_n": 512, "predicted_ms": 38711.2}}


def ollama_missing(model):
    return {"error": {"message": f'model "{model}" not found, try pulling it first', "type": "not_found_error",
                      "param": None, "code": None}}


LOADING = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}


# --- the seed's side --------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def no_settings_from_this_shell(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_CONTEXT_TOKENS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def said():
    return []


@pytest.fixture
def servers():
    """Makes fake servers; closes them after the test."""
    made = []

    def make(routes=()):
        made.append(FakeServer(routes))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture
def gateway(tmp_path, said):
    """Makes started gateways to a server, with tiny backoff; closes them after the test."""
    made = []

    def make(base, models=(QWEN,), key="", **settings):
        context_tokens, answer_format = settings.pop("context_tokens", 8192), settings.pop("answer_format", "files")
        settings = {"backoff": 0.01, "say": said.append, **settings}
        made.append(gateway_module.Gateway(local.OpenAICompatible(base, key, list(models), context_tokens,
                                                                  answer_format),
                                           tmp_path / "backups", **settings))
        made[-1].start()
        return made[-1]

    yield make
    for gw in made:
        gw.close()


def budget_of(context):
    """The prompt budget of a context: 60 % of it, less 500 tokens of room for a folded schema, under the 4/3 margin."""
    return int((context * 0.6 - 500) * 3 / 4)


def closed_port():
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    return f"http://127.0.0.1:{port}/v1"


# --- translation ------------------------------------------------------------------------------------
def test_the_request_goes_as_messages_with_the_schema_as_response_format(gateway, servers):
    server = servers(ollama(running=16384)).answer(ollama_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, answer_format="json")
    plan = gw.open_run()
    assert plan.model == QWEN and plan.budget == budget_of(16384)
    response = ask(gw, plan.token)
    assert response.status_code == 200 and response.json() == {
        "candidates": [{"content": {"role": "model", "parts": [{"text": json.dumps(PAYLOAD)}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1845, "thoughtsTokenCount": 0, "candidatesTokenCount": 402},
        "modelVersion": QWEN}
    [chat] = server.chats()
    assert chat["body"] == {"model": QWEN, "messages": [{"role": "system", "content": RULES},
                                                        {"role": "user", "content": GOAL}],
                            "stream": True, "stream_options": {"include_usage": True},  # no temperature: the
                            "max_tokens": 16384 - int(16384 * 0.6),  # seed asked none, and sampling is the seed's
                            "response_format": {"type": "json_schema", "json_schema": {
                                "name": "answer", "schema": JSON_SCHEMA, "strict": True}}}
    assert "authorization" not in chat["headers"]


def test_the_seed_gets_the_same_answer_as_from_gemini(gateway, servers, tmp_path):
    server = servers(llama_cpp()).answer(llama_cpp_answer(json.dumps(PAYLOAD)))
    fake = FakeGemini().reply(api.answer([(item["path"], item["content"]) for item in PAYLOAD["files"]],
                                         tasks=PAYLOAD["tasks"], done=PAYLOAD["done"]))
    try:
        door = gateway_module.Gateway(gemini.Gemini(fake.url, "AIzaSy" + "A" * 33, ["gemini-3.5-flash"]),
                                      tmp_path / "gemini", limits="", backoff=0.01, say=lambda line: None)
        door.start()
        from_gemini = ask(door, door.open_run().token).json()
        door.close()
    finally:
        fake.close()
    gw = gateway(server.base, models=[LLAMA_CPP])
    from_server = ask(gw, gw.open_run().token).json()
    assert from_server["candidates"] == from_gemini["candidates"]
    assert set(from_server["usageMetadata"]) <= set(from_gemini["usageMetadata"])


@pytest.mark.parametrize("answer", [
    ollama_answer(f"<think>\nOkay, the user wants notes. A draft: {DRAFT}\n</think>\n\n```json\n"
                  f"{json.dumps(PAYLOAD, indent=2)}\n```"),  # a reasoning model's thinking inline
    ollama_answer(f"<thought>A draft: {DRAFT}</thought>Here is the JSON you asked for: {json.dumps(PAYLOAD)}"),
    ollama_answer(f"Okay, the template opened the section. A draft: {DRAFT}\n</think>\n\n{json.dumps(PAYLOAD)}"),
    ollama_answer(json.dumps(PAYLOAD), reasoning=f"A draft: {DRAFT}"),  # Ollama's own reasoning field
    llama_cpp_answer(json.dumps(PAYLOAD), reasoning_content=f"<think>A draft: {DRAFT}</think>")],
    ids=["think", "thought", "closing-tag-only", "ollama-reasoning", "llama-cpp-reasoning-content"])
def test_reasoning_is_dropped_and_the_answer_comes_back_clean(gateway, servers, answer):
    server = servers(ollama(running=16384)).answer(answer)
    gw = gateway(server.base)
    response = ask(gw, gw.open_run().token)
    assert response.status_code == 200 and answer_of(response) == PAYLOAD
    assert response.json()["candidates"][0]["content"]["parts"][0]["text"] == json.dumps(PAYLOAD)


def test_usage_is_counted_with_reasoning_tokens_as_thinking(gateway, servers, tmp_path):
    usage = {"prompt_tokens": 1845, "completion_tokens": 900, "total_tokens": 2745,
             "completion_tokens_details": {"reasoning_tokens": 600}}
    server = servers(llama_cpp()).answer(llama_cpp_answer(json.dumps(PAYLOAD), usage=usage))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert gw.close_run(plan.token).tokens == {"prompt": 1845, "output": 300, "thinking": 600}
    assert requests_booked(tmp_path / "backups")[LLAMA_CPP] == {"requests": 1, "prompt": 1845, "output": 300,
                                                               "thinking": 600, "kinds": {"answer": 1}, "wasted": {}}


def test_a_token_count_no_request_could_reach_is_not_believed(gateway, servers, tmp_path):
    usage = {"prompt_tokens": 2 ** 70, "completion_tokens": 10 ** 12, "total_tokens": 2 ** 70}  # past SQLite's integers
    server = servers(llama_cpp()).answer(llama_cpp_answer(json.dumps(PAYLOAD), usage=usage))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert gw.close_run(plan.token).tokens == {"prompt": 0, "output": 0, "thinking": 0}


def test_the_files_that_came_whole_are_salvaged_from_a_length_cut_off(gateway, servers):
    cut = ('{"tasks": ["one", "two"], "files": [{"path": "a.py", "content": "A = 1\\n"}, '
           '{"path": "b.py", "content": "B = ')
    server = servers(llama_cpp()).answer(llama_cpp_answer(cut, finish="length"))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 200 and response.json()["candidates"][0]["finishReason"] == "STOP"
    assert answer_of(response) == {"tasks": ["one", "two"], "done": [],
                                   "files": [{"path": "a.py", "content": "A = 1\n"}]}
    assert gw.close_run(plan.token).salvaged == CUT_AT_THE_LIMIT


def test_an_answer_cut_off_while_still_thinking_is_unusable(gateway, servers):
    server = servers(ollama(running=16384)).answer(ollama_answer("<think>\nFirst, the notes need a", "length"))
    gw = gateway(server.base)
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 502
    report = gw.close_run(plan.token)
    assert report.problem == Problem(Trouble.UNUSABLE, "empty answer (finishReason MAX_TOKENS)")


@pytest.mark.parametrize("refusal", [
    {"error": {"message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this "
                          "model.", "type": "invalid_request_error", "param": "response_format", "code": None}},
    {"error": "'response_format.json_schema.schema' must be an object"}], ids=["openai-shape", "lm-studio-string"])
def test_a_refused_response_format_is_learned_once_and_the_schema_goes_as_text(gateway, servers, refusal):
    server = servers(lm_studio(loaded=16384)).answer(refusal, 400).answer(refusal, 400)
    server.answer(ollama_answer(json.dumps(PAYLOAD))).answer(ollama_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, models=[GEMMA], answer_format="json")
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["feature refused"] * 2 + ["answer"]
    gw.close()
    again = gateway(server.base, models=[GEMMA], answer_format="json")
    assert ask(again, again.open_run().token).status_code == 200
    first, second, *without = [chat["body"] for chat in server.chats()]
    assert first["response_format"]["type"] == "json_schema" and second["response_format"] == {
        "type": "json_object", "schema": JSON_SCHEMA} and len(without) == 2
    for body in without:
        assert "response_format" not in body and body["messages"][-1]["content"] == (
            f"{GOAL}\n\n{answers.ANSWER_ONLY} It follows this schema: {json.dumps(SCHEMA)}")


def test_after_json_schema_is_refused_the_schema_goes_as_json_object_never_as_no_constraint(gateway, servers):
    """llama-cpp-python refuses json_schema with a 500 and takes json_object with a schema (a grammar): the gateway
    used to fall back to no constraint at all."""
    refusal = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "
                                    "\"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]"}}
    server = servers(llama_cpp()).answer(refusal, 500).answer(llama_cpp_answer(json.dumps(PAYLOAD)))
    server.answer(llama_cpp_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, models=[LLAMA_CPP], answer_format="json")
    assert ask(gw, gw.open_run().token).status_code == 200
    gw.close()
    again = gateway(server.base, models=[LLAMA_CPP], answer_format="json")
    assert answer_of(ask(again, again.open_run().token)) == PAYLOAD
    formats = [chat["body"]["response_format"] for chat in server.chats()]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1] == formats[2] == {"type": "json_object", "schema": JSON_SCHEMA}


def test_a_streamed_answer_is_read_whole(gateway, servers):
    text = "- Add notes\nDone: none\n<file path=\"notes.py\">\nNOTES = []\n</file>\n"
    server = servers(llama_cpp()).answer(Stream(re.findall(r".{1,3}", text, re.S)))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert answer_of(ask(gw, plan.token))["files"] == [{"path": "notes.py", "content": "NOTES = []\n"}]
    assert gw.close_run(plan.token).tokens["output"] == len(re.findall(r".{1,3}", text, re.S))


def test_a_stream_that_fails_before_its_first_token_is_asked_again_unstreamed_and_its_error_read(gateway, servers):
    """llama-cpp-python answers a streamed request over its context (or with a response_format it refuses) with a
    200 and nothing after it (bench/real_servers.py); unstreamed, it says why."""
    overflow = {"error": {"message": "Requested tokens (4637) exceed context window of 2048",
                          "type": "invalid_request_error"}}
    server = servers(llama_cpp()).answer(Stream([], finish=None, events=False)).answer(overflow, 400)
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 429  # a wait: the next run is budgeted to the context stated
    first, second = [chat["body"] for chat in server.chats()]
    assert first["stream"] is True and "stream" not in second and "stream_options" not in second
    assert "the next run is budgeted to 2,048 tokens" in gw.close_run(plan.token).problem.why


def test_a_runaway_answer_is_stopped_early_its_whole_files_kept_and_the_server_left(gateway, servers):
    """Qwen2.5-Coder 1.5B once wrote "\\t" to its token limit: 6,554 tokens, 381 s."""
    whole = "- Add notes\nDone: none\n<file path=\"notes.py\">\nNOTES = []\n</file>\n<file path=\"tests/t.py\">\n"
    stream = Stream(itertools.chain(whole, itertools.repeat("\t", 20_000)))
    server = servers(llama_cpp()).answer(stream)
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert answer_of(ask(gw, plan.token))["files"] == [{"path": "notes.py", "content": "NOTES = []\n"}]
    assert stream.hung_up.wait(5) and stream.sent < 1_500
    report = gw.close_run(plan.token)
    assert report.salvaged == ("cut off (REPETITION: the keeper stopped it as it repeated itself (a short piece over "
                                  "and over, or a block twice)): kept the 1 file(s) that came whole")


def test_an_answer_that_sends_a_whole_file_again_and_again_is_stopped_at_its_second_copy(gateway, servers):
    """The 1.5B sent one file block back 4 to 20 times in an answer, to its token limit (927 s): pieces of 60
    characters missed it. The copies that came whole are kept (the same file, as the model wrote it)."""
    block = "<file path=\"roman.py\">\n" + "".join(f"VALUE_{n} = {n} * 2  # the value\n" for n in range(14)) + "</file>\n"
    stream = Stream(itertools.chain("- Add roman.py\nDone: none\n", itertools.repeat(block, 200)))
    server = servers(llama_cpp()).answer(stream)
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    kept = answer_of(ask(gw, plan.token))["files"]
    assert {(item["path"], item["content"].count("VALUE_0 ")) for item in kept} == {("roman.py", 1)}
    assert stream.hung_up.wait(5) and stream.sent < 100, stream.sent  # of 200 blocks: stopped early
    assert "REPETITION" in gw.close_run(plan.token).salvaged


def test_the_upstream_request_is_closed_when_the_run_ends(gateway, servers):
    """llama-cpp-python goes on generating a request whose client went away, unless it streams."""
    stream = Stream(itertools.repeat("x = 1\n", 10_000), pause=0.01)
    server = servers(llama_cpp()).answer(stream)
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    asking = threading.Thread(target=ask, args=(gw, plan.token), daemon=True)
    asking.start()
    time.sleep(0.5)
    assert gw.close_run(plan.token, linger=5).asking
    assert stream.hung_up.wait(5) and stream.sent < 500


def test_a_local_model_is_asked_for_file_blocks_and_the_seed_gets_its_json(gateway, servers):
    """Qwen2.5-Coder 1.5B writes code in JSON strings badly; asked for the blocks the prompt shows files in, it
    writes them with no escaping (bench/real_model.py)."""
    text = ("- Add notes.py\n- Test it\nDone: 1\n\n<file path=\"notes.py\">\nprint('a \\\\ b')\n</file>\n"
            "<file path=\"tests/test_notes.py\">\n```python\ndef test_it():\n    assert True\n```\n</file>\n")
    server = servers(llama_cpp()).answer(llama_cpp_answer(text))
    gw = gateway(server.base, models=[LLAMA_CPP])
    response = ask(gw, gw.open_run().token)
    assert answer_of(response) == {"tasks": ["Add notes.py", "Test it"], "done": [1], "files": [
        {"path": "notes.py", "content": "print('a \\\\ b')\n"},
        {"path": "tests/test_notes.py", "content": "def test_it():\n    assert True\n"}]}
    [chat] = server.chats()
    assert "response_format" not in chat["body"]
    assert chat["body"]["messages"][-1]["content"] == f"{GOAL}\n\n{answers.FILES_FORMAT}"


# --- budgets ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("routes, model, context", [
    (ollama(running=16384), QWEN, 16384),       # loaded: /api/ps says the context it runs with
    (ollama(num_ctx=32768), QWEN, 32768),       # not loaded, num_ctx in its Modelfile
    (ollama(maximum=40960), QWEN, 8192),        # not loaded: the setting, under the model's maximum
    (llama_cpp(n_ctx=12288), LLAMA_CPP, 12288),
    (vllm(max_model_len=32768), VLLM, 32768),
    (lm_studio(loaded=16384), GEMMA, 16384),
    (lm_studio(), GEMMA, 8192),                 # not loaded yet
    (bare(), QWEN, 8192)], ids=["ollama-loaded", "ollama-num-ctx", "ollama-unloaded", "llama-cpp", "vllm",
                                "lm-studio-loaded", "lm-studio-unloaded", "a-server-that-says-nothing"])
def test_the_prompt_budget_comes_from_the_context_the_server_says(gateway, servers, routes, model, context):
    server = servers(routes)
    assert gateway(server.base, models=[model]).open_run().budget == budget_of(context)


def test_the_context_setting_counts_when_the_server_says_nothing(gateway, servers, monkeypatch):
    server = servers(bare())
    monkeypatch.setenv("OPENAI_CONTEXT_TOKENS", "20000")
    assert gateway(server.base, context_tokens=None).open_run().budget == budget_of(20000)
    monkeypatch.setenv("OPENAI_CONTEXT_TOKENS", "16k")
    with pytest.raises(ValueError, match="OPENAI_CONTEXT_TOKENS is not a number of tokens: '16k'"):
        gateway(server.base, context_tokens=None)


def test_a_model_loaded_after_the_first_run_gets_the_context_ollama_runs_it_with(gateway, servers):
    server = servers(ollama()).answer(ollama_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base)
    plan = gw.open_run()
    assert plan.budget == budget_of(8192) and ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    server.routes.update(ollama(running=32768))  # the request loaded it
    assert gw.open_run().budget == budget_of(32768)


@pytest.mark.parametrize("routes, model, context, fix", [
    (ollama(running=4096), QWEN, 4096, "start Ollama with `OLLAMA_CONTEXT_LENGTH=8192 ollama serve`"),
    (llama_cpp(n_ctx=4096), LLAMA_CPP, 4096, "start llama-server with `--ctx-size 8192` for each parallel slot"),
    (ollama(maximum=4096), QWEN, 4096, "that is the model's own maximum"),
    (bare(), QWEN, 6000, "set OPENAI_CONTEXT_TOKENS=8192 in .env")],
    ids=["ollama", "llama-cpp", "the-models-maximum", "the-setting"])
def test_a_context_too_small_stops_with_one_line_naming_what_to_raise(gateway, servers, routes, model, context, fix):
    server = servers(routes)
    plan = gateway(server.base, models=[model], context_tokens=6000).open_run()
    assert plan.stop.startswith(f"no usable model: {model}: a context of {context:,} tokens leaves a prompt of "
                                   f"~{budget_of(context):,} (the seed needs 3,000): {fix}")
    assert "OPENAI_MODEL" in plan.stop and "\n" not in plan.stop and server.chats() == []


def test_a_prompt_over_the_servers_context_stops_naming_what_to_raise(gateway, servers):
    over = {"error": {"code": 400, "message": "request (9412 tokens) exceeds the available context size (8192 tokens), "
                      "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 9412, "n_ctx": 8192}}
    server = servers(llama_cpp(n_ctx=8192)).answer(over, 400)
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 403
    assert gw.close_run(plan.token).problem == Problem(Trouble.STOP, (
        f"{LLAMA_CPP}: the prompt is over the context the server gives it (400: request (9412 tokens) exceeds the "
        "available context size (8192 tokens), try increasing it): start llama-server with `--ctx-size 16384` for "
        "each parallel slot"))


def test_no_daily_quota_and_no_pacing(gateway, servers, tmp_path):
    server = servers(llama_cpp())
    gw = gateway(server.base, models=[LLAMA_CPP])
    for _ in range(8):  # more than any free tier's requests a minute
        server.answer(llama_cpp_answer(json.dumps(PAYLOAD)))
        plan = gw.open_run()
        assert plan.model == LLAMA_CPP and ask(gw, plan.token, timeout=5).status_code == 200
        gw.close_run(plan.token)
    assert requests_booked(tmp_path / "backups")[LLAMA_CPP]["requests"] == 8 and gw.open_run().model == LLAMA_CPP


# --- what a person can fix, and what to wait out ------------------------------------------------------
def test_a_server_not_running_at_the_start_stops_with_one_line(gateway):
    base = closed_port()
    assert gateway(base).open_run() == Plan(
        stop=f"cannot reach {base}: start the server (for Ollama: `ollama serve`), or fix OPENAI_BASE_URL in .env")


def test_a_server_that_stops_mid_run_is_a_wait(gateway, servers):
    server = servers(llama_cpp()).answer(llama_cpp_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    server.close()
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 503 and "is the server still running?" in response.json()["error"]["message"]
    report = gw.close_run(plan.token)
    assert report.problem.kind == "wait" and 290 < seconds_from_now(report.problem.until) <= 300
    assert [call["kind"] for call in report.calls] == ["network error"] * 3
    assert gw.open_run().token


def test_a_server_gone_when_the_next_run_is_planned_is_a_wait(gateway, servers):
    server = servers(ollama()).answer(ollama_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base)
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    gw.close_run(plan.token)
    server.close()
    plan = gw.open_run()
    assert 290 < seconds_from_now(plan.wait_until) <= 300 and "is the server still running?" in plan.why


@pytest.mark.parametrize("status, body, why", [
    (404, ollama_missing(QWEN), f'{QWEN} is not on the server (404: model "{QWEN}" not found, try pulling it '
                                f'first): pull it with `ollama pull {QWEN}`, or set OPENAI_MODEL to a model python '
                                'fallback.py --models lists'),
    (404, "404 page not found", "does not serve /chat/completions (404: 404 page not found): is OPENAI_BASE_URL "
                                "right? (for Ollama: http://localhost:11434/v1)")],
    ids=["not-pulled", "wrong-base-url"])
def test_a_missing_model_stops_with_one_line_saying_how_to_fix_it(gateway, servers, status, body, why):
    """A model the server lists (removed since, or a wrong path that answers 404 all the same)."""
    server = servers(ollama()).answer(body, status)
    gw = gateway(server.base, models=[QWEN])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 403
    problem = gw.close_run(plan.token).problem
    assert problem.kind == "stop" and problem.why.endswith(why) and "\n" not in problem.why
    assert gw.open_run() == Plan(stop=problem.why) and len(server.chats()) == 1


def test_a_model_the_server_does_not_list_is_never_asked_and_the_next_one_is(gateway, servers):
    server = servers(ollama(running=16384)).answer(ollama_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, models=["qwen9:1b", QWEN])
    plan = gw.open_run()
    assert plan.model == QWEN and ask(gw, plan.token).status_code == 200
    assert [chat["body"]["model"] for chat in server.chats()] == [QWEN]
    alone = gateway(server.base, models=["qwen9:1b"])
    assert alone.open_run() == Plan(stop=f"no usable model: qwen9:1b: the server does not list it (it has {QWEN}, "
                                         "llama3.2:latest). Set OPENAI_MODEL in .env to models your server has (python "
                                         "fallback.py --models lists them)")


def test_a_refused_key_stops_with_one_line_and_the_key_is_nowhere(gateway, servers, said, tmp_path):
    key = "sk-local-" + uuid.uuid4().hex
    server = servers(vllm()).answer({"error": f"Unauthorized: {key}"}, 401)
    gw = gateway(server.base, models=[VLLM], key=key)
    plan = gw.open_run()
    response = ask(gw, plan.token)
    assert response.status_code == 403 and key not in response.text
    assert server.chats()[0]["headers"]["authorization"] == f"Bearer {key}"
    why = gw.close_run(plan.token).problem.why
    assert why == (f"the server at {server.base} refused the key (401: Unauthorized: [OPENAI_API_KEY]): set "
                   "OPENAI_API_KEY in .env to the key it expects (LiteLLM's proxy: its master key or a virtual key)")
    assert key not in "\n".join(said) and all(
        key.encode() not in path.read_bytes() for path in (tmp_path / "backups").iterdir())


def test_a_model_still_loading_is_asked_again(gateway, servers):
    server = servers(llama_cpp()).answer(LOADING, 503).answer(llama_cpp_answer(json.dumps(PAYLOAD)))
    gw = gateway(server.base, models=[LLAMA_CPP])
    plan = gw.open_run()
    assert ask(gw, plan.token).status_code == 200
    assert [call["kind"] for call in gw.close_run(plan.token).calls] == ["server error 503", "answer"]


# --- the keeper's setup ---------------------------------------------------------------------------------
def test_openai_base_url_chooses_the_server_and_no_gemini_key_is_needed(tmp_path):
    environ = {"OPENAI_BASE_URL": "http://localhost:11434/v1/", "OPENAI_MODEL": "qwen3:8b, llama3.2",
               "GEMINI_MODEL": "gemini-3.5-flash"}
    assert backends.chosen(environ) is local and backends.chosen_models(environ) == ["qwen3:8b", "llama3.2"]
    backend = local.from_env(environ)
    assert (backend.upstream, backend.key, backend.models) == ("http://localhost:11434/v1", "", ["qwen3:8b", "llama3.2"])
    with pytest.raises(ValueError, match=r"^OPENAI_MODEL is not set: name the model\(s\) your server runs"):
        backends.open_gateway({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, tmp_path)
    assert backends.chosen({"GEMINI_API_KEY": "k"}) is gemini
    backend = gemini.from_env({"GEMINI_API_KEY": "k"})
    assert (backend.upstream, backend.key, backend.models) == (
        "https://generativelanguage.googleapis.com", "k", ["gemini-3.5-flash", "gemini-3.5-flash-lite",
                                                           "gemma-4-26b-a4b-it"])


def test_list_models_gives_the_servers_models_or_one_line(servers):
    assert local.list_models(servers(ollama()).base) == [
        {"model": QWEN, "owned_by": "library", "context": None},
        {"model": "llama3.2:latest", "owned_by": "library", "context": None}]
    assert local.list_models(servers(vllm()).base) == [{"model": VLLM, "owned_by": "vllm", "context": 32768}]
    base = closed_port()
    with pytest.raises(ConnectionError, match=rf"^cannot reach {base} \(ConnectionError\): start the server"):
        local.list_models(base)
    with pytest.raises(ValueError, match="did not list its models .*is OPENAI_BASE_URL right"):
        local.list_models(servers(bare()).base.removesuffix("/v1"))


# --- end to end, through python fallback.py ---------------------------------------------------------
def test_with_three_lines_in_env_a_change_lands_from_a_local_server_and_no_gemini_key(workspace, env, servers):
    from test_fallback import outcomes, run_fallback
    server = servers(ollama(running=16384))
    payload = {"tasks": ["Add notes", "Keep them", "Test them"], "done": [],
               "files": [{"path": "notes.py", "content": "NOTES = []\n"}]}
    server.answer(ollama_answer("<think>\nThe goal wants notes.\n</think>\n\n" + json.dumps(payload)))
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={QWEN}\n")
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert (workspace / "notes.py").read_text() == "NOTES = []\n"
    assert f"- Model: {QWEN}, 1 request(s), tokens 1,845 prompt + 402 output" in (workspace / "iteration_log.md").read_text()
    [chat] = server.chats()
    assert chat["body"]["model"] == QWEN and chat["body"]["messages"][-1]["content"].endswith(answers.FILES_FORMAT)
    listed = run_fallback(workspace, env, "--models")
    assert listed.returncode == 0 and re.search(rf"^{re.escape(QWEN)} +\? +yes$", listed.stdout, re.M), listed.stdout
    assert re.search(r"^llama3\.2:latest ", listed.stdout, re.M)
    status = run_fallback(workspace, env, "--status")
    assert re.search(rf"^  {re.escape(QWEN)} +1 request\(s\)", status.stdout, re.M) and "gemini" not in status.stdout


def test_a_local_server_that_is_not_running_stops_with_one_line(workspace, env):
    del env["GEMINI_API_KEY"]
    env.update(OPENAI_BASE_URL=closed_port(), OPENAI_MODEL=QWEN)
    from test_fallback import run_fallback
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 78 and "start the server (for Ollama: `ollama serve`)" in done.stdout


def test_a_server_no_probe_knows_is_not_probed_again_each_run(gateway, servers):
    """llama-cpp-python says no context anywhere: its probes were repeated before every run."""
    server = servers(bare())
    gw = gateway(server.base)
    gw.close_run(gw.open_run().token)
    probed = len(server.requests)
    gw.close_run(gw.open_run().token)
    assert probed > 1 and len(server.requests) == probed
