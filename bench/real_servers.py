"""Benchmark: the keeper against real OpenAI-compatible servers on loopback, end to end, with no model download.

    python bench/real_servers.py                 # installs into ~/.cache/seed-bench/real-servers (first run: minutes)
    python bench/real_servers.py --cache DIR     # another place for the throwaway virtual environments

Two servers that install with pip, each in a throwaway virtual environment of its own (never this project's):
- LiteLLM's proxy (`litellm[proxy]`), with models whose `mock_response` is the answer (or a context-window
  error), so no upstream model is needed, behind a master key (the proxy wants one);
- llama-cpp-python's server (`llama-cpp-python[server]`, built from source), on a tiny GGUF of random weights
  written here with the `gguf` package from llama.cpp's own vocabulary file (in the source pip fetches): the
  answers are noise, but the server, its errors and its limits are real.
Each check runs `python fallback.py` in a fresh copy of the workspace (a goal, no key but the server's) and
prints one line: PASS or FAIL, what it checked, its time. Between the keeper and each server a recording
relay keeps every request and answer, which are then validated with the `openai` SDK's own types; the seed's
request to the gateway and the gateway's answer are validated with `google-genai`'s types, and google-genai's
client itself asks the gateway (its default path). Last, the versions that ran. Exit status: 0 when every
check passed.
"""
import argparse
import contextlib
import io
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "seed-bench" / "real-servers"
MASTER_KEY = "sk-bench-" + os.urandom(6).hex()
GOAL = "# Goal\n\nGrow a small note keeper, notes.py, with a test for each command.\n"
ANSWER = json.dumps({"tasks": ["Add notes", "List them", "Test them"], "done": [],
                     "files": [{"path": "notes.py", "content": "NOTES = []\n\n\ndef add(text):\n    NOTES.append(text)\n"}]})
FILES = ["seed.py", "fallback.py", ".env.example", "supervisor/tests/conftest.py", "supervisor/tests/fake_gemini.py", "supervisor/tests/test_seed.py",
         *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                 if "tests" not in p.relative_to(REPO).parts)]
VENVS = {"litellm": ["litellm[proxy]", "openai", "google-genai"], "llama": ["llama-cpp-python[server]", "gguf"]}
TINY = "tiny"  # the llama-cpp-python model's alias
PORTABLE = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"  # llama.cpp
# built for any x86-64 of the last decade, never -march=native: on a virtual machine whose CPU lists AMX that the
# kernel does not grant, a native build traps at the first request; pip's wheel cache is off (it keys by version,
# not by these flags, and would hand back a native wheel)
results, notes = [], []


# --- set-up -------------------------------------------------------------------------------------------
def venv(cache, name, packages=None):
    """A throwaway virtual environment with the packages installed (made once, then reused); its python."""
    packages = packages or VENVS[name]
    python = cache / name / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(cache / name)], check=True)
    missing = subprocess.run([str(python), "-c", "import importlib.metadata as m, sys; [m.version(n.split('[')[0].split('=')[0]) "
                              "for n in sys.argv[1:]]", *packages], capture_output=True).returncode
    if missing:
        print(f"installing {' '.join(packages)} into {cache / name} (llama-cpp-python builds from source the first time: minutes)",
              flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", *packages], check=True,
                       env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2), "CMAKE_ARGS": PORTABLE})
    return python


def versions(python, names):
    code = "import importlib.metadata as m, sys; print(' '.join(f'{n}={m.version(n)}' for n in sys.argv[1:]))"
    return subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True).stdout.strip()


def tiny_gguf(cache, python):
    """A GGUF of random weights with llama.cpp's own llama-spm vocabulary, from the source pip fetches."""
    model = cache / "tiny.gguf"
    if model.exists():
        return model
    version = versions(python, ["llama-cpp-python"]).split("=")[1]
    source = cache / "source"
    subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(source)], check=True)
    [archive] = source.glob("llama_cpp_python-*.tar.gz")
    with tarfile.open(archive) as tar:
        [member] = [m for m in tar.getmembers() if m.name.endswith("models/ggml-vocab-llama-spm.gguf")]
        vocab = source / "ggml-vocab-llama-spm.gguf"
        vocab.write_bytes(tar.extractfile(member).read())
    subprocess.run([str(python), "-c", WRITE_GGUF, str(vocab), str(model)], check=True)
    return model


WRITE_GGUF = r'''
import sys, numpy as np, gguf
reader, writer = gguf.GGUFReader(sys.argv[1]), gguf.GGUFWriter(sys.argv[2], "llama")
T = gguf.GGUFValueType
for name, field in reader.fields.items():
    if not name.startswith("tokenizer."):
        continue
    kind = field.types[0]
    if kind == T.ARRAY:
        strings = field.types[-1] == T.STRING
        values = [bytes(field.parts[i]).decode("utf-8", "replace") if strings else field.parts[i].tolist()[0]
                  for i in field.data]
        vocab = len(values) if name == "tokenizer.ggml.tokens" else globals().get("vocab")
        writer.add_array(name, values)
    elif kind == T.STRING:
        writer.add_string(name, bytes(field.parts[field.data[0]]).decode())
    else:
        add = {T.UINT32: writer.add_uint32, T.INT32: writer.add_int32, T.BOOL: writer.add_bool,
               T.FLOAT32: writer.add_float32}[kind]
        add(name, field.parts[field.data[0]].tolist()[0])
E, FF, H = 64, 128, 2
writer.add_context_length(32768); writer.add_embedding_length(E); writer.add_block_count(1)
writer.add_feed_forward_length(FF); writer.add_head_count(H); writer.add_head_count_kv(H)
writer.add_layer_norm_rms_eps(1e-5); writer.add_rope_dimension_count(E // H)
rng = np.random.default_rng(0)
weights = lambda *shape: (rng.standard_normal(shape) * 0.02).astype(np.float32)
writer.add_tensor("token_embd.weight", weights(vocab, E)); writer.add_tensor("output.weight", weights(vocab, E))
writer.add_tensor("output_norm.weight", np.ones(E, np.float32))
for name, shape in [("attn_q", (E, E)), ("attn_k", (E, E)), ("attn_v", (E, E)), ("attn_output", (E, E)),
                    ("ffn_gate", (FF, E)), ("ffn_up", (FF, E)), ("ffn_down", (E, FF))]:
    writer.add_tensor(f"blk.0.{name}.weight", weights(*shape))
writer.add_tensor("blk.0.attn_norm.weight", np.ones(E, np.float32))
writer.add_tensor("blk.0.ffn_norm.weight", np.ones(E, np.float32))
writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()
'''


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command, port, log, ready_path, key=None, seconds=180):
    """A server process on loopback, once it answers at ready_path."""
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}{ready_path}", headers=headers),
                                   timeout=2)
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{command[0]} did not start on port {port}: see {log}")


class Relay:
    """A recording relay on loopback: every request to the server, and its answer, kept as they went; with a limit,
    the chat requests past it are answered 400 (a budget spent) and never reach the server."""

    def __init__(self, target, limit=None):
        self.target, self.exchanges, self.limit, self.asked = target, [], limit, 0
        lock, relay = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.forward("GET")

            def do_POST(self):
                self.forward("POST")

            def forward(self, method):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                if self.path.endswith("/chat/completions"):
                    with lock:
                        relay.asked += 1
                        spent = relay.limit is not None and relay.asked > relay.limit
                    if spent:
                        return self.refuse(f"the budget of {relay.limit} requests is spent")
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                request = urllib.request.Request(f"{relay.target}{self.path}", data=data or None, headers=headers,
                                                 method=method)
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, kind = response.status, response.headers.get("Content-Type")
                        body = self.pass_on(status, kind, response)
                except urllib.error.HTTPError as error:
                    status, kind = error.code, error.headers.get("Content-Type")
                    body = self.pass_on(status, kind, error)
                relay.exchanges.append({"method": method, "path": self.path, "request": data.decode() or None,
                                        "status": status, "answer": body.decode("utf-8", "replace")})

            def refuse(self, why):
                body = json.dumps({"error": {"message": why, "type": "invalid_request_error"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def pass_on(self, status, kind, response):
                """The answer passed on as it comes (a stream event by event, and the server left when the keeper
                hangs up: it then stops generating); its bytes, as far as they went."""
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.end_headers()  # no length: the connection's end is the answer's (HTTP/1.0)
                body = b""
                while piece := response.read1(65536) if hasattr(response, "read1") else response.read():
                    body += piece
                    try:
                        self.wfile.write(piece)
                        self.wfile.flush()
                    except OSError:
                        break
                return body

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def chats(self):
        return [e for e in self.exchanges if e["path"] == "/v1/chat/completions"]


# --- the loop, as a person runs it --------------------------------------------------------------------
def workspace(settings):
    """A fresh copy of the workspace with a goal and a .env naming the server; no Gemini key."""
    root = Path(tempfile.mkdtemp(prefix="seed-real-")) / "workspace"
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    (root / "goal.md").write_text(GOAL)
    (root / "pending_tasks.md").write_text("# Pending tasks\n\n")
    (root / ".env").write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    return root


def fallback(root, *args, timeout=900):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    return subprocess.run([sys.executable, "fallback.py", "--delay", "0", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def outcomes(root):
    log = (root / "iteration_log.md").read_text() if (root / "iteration_log.md").exists() else ""
    return re.findall(r"^## Iteration \d+ — [\d-]+ [\d:]+ UTC — (.*)$", log, re.M)


def stop_line(done):
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "stopped: " in line or "fallback: " in line]
    return lines[-1] if lines else (done.stdout + done.stderr).strip()[-300:]


def check(server, what, test):
    """Run one check; print PASS/FAIL, what it checked and its time (and what was seen, when it failed)."""
    started = time.monotonic()
    try:
        seen = test()
        passed = seen is True
    except Exception as error:  # noqa: BLE001 (a check that breaks is a failed check, said in one line)
        passed, seen = False, f"{type(error).__name__}: {error}"
    line = f"{'PASS' if passed else 'FAIL'}  {server:<17} {what:<62} {time.monotonic() - started:6.1f} s"
    print(line + ("" if passed else f"\n      saw: {str(seen)[:400]}"), flush=True)
    results.append(passed)


def expect(condition, seen):
    return True if condition else seen


# --- the checks -----------------------------------------------------------------------------------------
def litellm_checks(python, logs):
    port = free_port()
    config = logs / "litellm.yaml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "model_list": [{"model_name": "mock-coder", "litellm_params": {"model": "openai/mock-coder", "api_key": "x",
                                                                       "mock_response": ANSWER},
                        "model_info": {"max_input_tokens": 32768}},
                       {"model_name": "mock-overflow", "litellm_params": {
                           "model": "openai/mock-overflow", "api_key": "x",
                           "mock_response": "litellm.ContextWindowExceededError"}}],
        "general_settings": {"master_key": MASTER_KEY}}))
    litellm = str(Path(python).parent / "litellm")
    process = start([litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)], port,
                    logs / "litellm.log", "/health/liveliness")
    relay = Relay(f"http://127.0.0.1:{port}")
    good = {"OPENAI_BASE_URL": relay.base, "OPENAI_MODEL": "mock-coder", "OPENAI_API_KEY": MASTER_KEY}
    try:
        def listed():
            done = fallback(workspace(good), "--models")
            return expect(done.returncode == 0 and re.search(r"^mock-coder +32,768 +yes$", done.stdout, re.M), done.stdout)

        def lands():
            root = workspace(good)
            done = fallback(root, "--iterations", "1")
            return expect(outcomes(root) == ["landed: 1 file(s) changed"] and (root / "notes.py").exists(),
                          outcomes(root) or stop_line(done))

        def unknown_model(settings, says):  # stopped before a request: the server's list does not have it
            asked = len(relay.chats())
            done = fallback(workspace(good | {"OPENAI_MODEL": "nope", **settings}), "--iterations", "3")
            return expect(done.returncode == 78 and says in stop_line(done) and not relay.chats()[asked:]
                          and "python fallback.py --models" in stop_line(done), stop_line(done))

        def wrong_key(key):
            settings = good | {"OPENAI_API_KEY": key} if key else {k: v for k, v in good.items() if k != "OPENAI_API_KEY"}
            done, listed = fallback(workspace(settings), "--iterations", "1"), fallback(workspace(settings), "--models")
            return expect(done.returncode == 78 and "set OPENAI_API_KEY" in stop_line(done) and listed.returncode == 78
                          and "set OPENAI_API_KEY" in listed.stderr, f"{stop_line(done)} | {listed.stderr.strip()}")

        def overflow():
            done = fallback(workspace(good | {"OPENAI_MODEL": "mock-overflow", "OPENAI_CONTEXT_TOKENS": "16384"}),
                            "--iterations", "1")
            return expect(done.returncode == 78 and "ContextWindowExceededError" in stop_line(done)
                          and "lower OPENAI_CONTEXT_TOKENS (now 16,384)" in stop_line(done), stop_line(done))

        def unsaid_context():  # the default of 8,192 is tried: the overflow says what to set
            done = fallback(workspace(good | {"OPENAI_MODEL": "mock-overflow"}), "--iterations", "1")
            return expect(done.returncode == 78 and "lower OPENAI_CONTEXT_TOKENS (now 8,192)" in stop_line(done),
                          stop_line(done))

        check("litellm", "--models lists the model and its max_input_tokens", listed)
        check("litellm", "a change lands (context from /v1/model/info)", lands)
        check("litellm", "an unknown model stops naming --models, before a request", lambda: unknown_model(
            {}, "nope: the server does not list it (it has mock-coder, mock-overflow)"))
        check("litellm", "... and with a context set too", lambda: unknown_model(
            {"OPENAI_CONTEXT_TOKENS": "16384"}, "nope: the server does not list it"))
        check("litellm", "a wrong key stops naming OPENAI_API_KEY (and --models)", lambda: wrong_key("sk-wrong"))
        check("litellm", "a missing key stops naming OPENAI_API_KEY (and --models)", lambda: wrong_key(None))
        check("litellm", "a context overflow stops with advice within the setting", overflow)
        check("litellm", "no context said: 8,192 is tried, the overflow names the fix", unsaid_context)
        check("litellm", "what the keeper sent and read validates (openai types)", lambda: validate_openai(
            python, relay.chats()))
        check("litellm", "google-genai's client gets a clean answer through the gateway", lambda: genai_through_gateway(
            python, good))
    finally:
        os.killpg(process.pid, 9)
        relay.server.shutdown()


def llama_checks(python, logs, model, sdk_python):
    port = free_port()
    process = start([str(python), "-m", "llama_cpp.server", "--model", str(model), "--model_alias", TINY,
                     "--host", "127.0.0.1", "--port", str(port)], port, logs / "llama-cpp-python.log", "/v1/models")
    relay = Relay(f"http://127.0.0.1:{port}")
    base = {"OPENAI_BASE_URL": relay.base, "OPENAI_MODEL": TINY}
    try:
        def listed():
            done = fallback(workspace(base), "--models")
            return expect(done.returncode == 0 and re.search(rf"^{TINY} +\? +yes$", done.stdout, re.M), done.stdout)

        def unsaid_context():  # the default of 8,192 is tried, and the context its overflow states is learned
            root = workspace(base)
            (root / "values.py").write_text("".join(f"VALUE_{n} = {n}\n" for n in range(500)))  # fills the prompt
            done = fallback(root, "--iterations", "2")
            return expect(done.returncode == 78 and "a context of 2,048 tokens" in stop_line(done)
                          and "--n_ctx 8192" in stop_line(done), stop_line(done))

        def silent_stream_then_overflow():
            # streamed, llama-cpp-python fails with a 200 and nothing: asked again unstreamed, it says why (here its
            # context, which it checks before the response_format it would refuse with a 500)
            root = workspace(base | {"OPENAI_CONTEXT_TOKENS": "12288", "OPENAI_ANSWER_FORMAT": "json"})
            done = fallback(root, "--iterations", "3")
            kinds = [(json.loads(e["request"]).get("stream", False), e["status"], e["answer"] == "") for e in
                     relay.chats()[-2:]]
            return expect(kinds == [(True, 200, True), (False, 400, False)] and done.returncode == 78
                          and "a context of 2,048 tokens" in stop_line(done) and "--n_ctx 8192" in stop_line(done),
                          f"{kinds}; {stop_line(done)}")

        check("llama-cpp-python", "--models lists the model (no context said)", listed)
        check("llama-cpp-python", "no context said: 8,192 tried, 2,048 learned, --n_ctx named", unsaid_context)
        check("llama-cpp-python", "a stream failed silently is asked unstreamed: its overflow is learned",
              silent_stream_then_overflow)
        check("llama-cpp-python", "what the keeper sent and read validates (openai types)",
              lambda: validate_openai(sdk_python, relay.chats()))
    finally:
        os.killpg(process.pid, 9)
        relay.server.shutdown()


VALIDATE_OPENAI = r'''
import json, sys
from pydantic import TypeAdapter
from openai.types.chat import ChatCompletion, ChatCompletionChunk, completion_create_params
sent_as = {False: TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming),
           True: TypeAdapter(completion_create_params.CompletionCreateParamsStreaming)}
checked = 0
for exchange in json.load(sys.stdin):
    sent = json.loads(exchange["request"])
    sent_as[bool(sent.get("stream"))].validate_python(sent)
    events = [line[6:] for line in exchange["answer"].splitlines() if line.startswith("data: {")]
    if exchange["status"] == 200 and events:
        [ChatCompletionChunk.model_validate_json(event) for event in events]
    elif exchange["status"] == 200 and (exchange["answer"] or not sent.get("stream")):  # a stream of nothing
        ChatCompletion.model_validate_json(exchange["answer"])
    checked += 1
print(checked)
'''


def validate_openai(python, chats):
    """Every chat request the keeper sent, and every answer it read, as the openai SDK's own types."""
    done = subprocess.run([str(python), "-c", VALIDATE_OPENAI], input=json.dumps(chats), capture_output=True, text=True)
    return expect(done.returncode == 0 and int(done.stdout or 0) == len(chats) > 0, done.stderr[-400:] or done.stdout)


GENAI = r'''
import json, sys
from google import genai
from google.genai import types
url, token, body = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for content in body["contents"]:
    types.Content.model_validate(content)   # the seed's request, part by part, as the SDK types it
types.Content.model_validate(body["systemInstruction"])
types.GenerationConfig.model_validate(body["generationConfig"])
client = genai.Client(api_key=token, http_options=types.HttpOptions(base_url=url))
answer = client.models.generate_content(model="any", contents=body["contents"][0]["parts"][0]["text"],
    config=types.GenerateContentConfig(system_instruction=body["systemInstruction"]["parts"][0]["text"],
                                       response_mime_type="application/json", response_schema=body["generationConfig"]["responseSchema"]))
print(json.dumps({"files": json.loads(answer.text)["files"], "path": client._api_client._http_options.api_version}))
'''


def genai_through_gateway(python, settings):
    """google-genai's client asks the keeper's gateway, as the seed would; the seed's own body validates as its types."""
    sys.path.insert(0, str(REPO))
    from supervisor.gateway import backends
    body = seed_request()
    with tempfile.TemporaryDirectory() as state:
        gateway = backends.open_gateway(settings, state, say=lambda line: None)
        try:
            plan = gateway.open_run(len(GOAL))
            done = subprocess.run([str(python), "-c", GENAI, gateway.url, plan.token, json.dumps(body)],
                                  capture_output=True, text=True, timeout=120)
        finally:
            gateway.close()
    seen = json.loads(done.stdout) if done.returncode == 0 else done.stderr[-400:]
    if isinstance(seen, dict):
        notes.append(f"google-genai asked the gateway at /{seen['path']}/models/...:generateContent")
    return expect(isinstance(seen, dict) and seen["files"][0]["path"] == "notes.py", seen)


def seed_request():
    """The body seed.py sends the gateway, caught as it leaves (its urlopen is replaced in the module loaded here)."""
    import importlib.util
    os.environ.update(GEMINI_API_BASE="http://127.0.0.1:9", GEMINI_API_KEY="token")
    spec = importlib.util.spec_from_file_location("seed_under_test", REPO / "seed.py")
    seed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seed)
    caught = {}

    def catch(request, **_):
        caught.update(json.loads(request.data))
        raise OSError("caught")

    seed.urlopen = catch
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its line for the console
            seed.ask(GOAL, 0)  # no answer rolled back before it
    except Exception:  # noqa: BLE001 (the seed's own Stop, once its request is caught)
        pass
    return caught


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the throwaway environments live")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    litellm_python, llama_python = venv(args.cache, "litellm"), venv(args.cache, "llama")
    model = tiny_gguf(args.cache, llama_python)
    logs = Path(tempfile.mkdtemp(prefix="seed-real-logs-"))
    litellm_checks(litellm_python, logs)
    llama_checks(llama_python, logs, model, litellm_python)
    print(f"{sum(results)}/{len(results)} checks passed in {time.monotonic() - started:.0f} s; server logs in {logs}")
    for note in notes:
        print(note)
    print(f"versions: python={platform.python_version()} {versions(litellm_python, ['litellm', 'openai', 'google-genai'])}"
          f" {versions(llama_python, ['llama-cpp-python', 'gguf'])}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
