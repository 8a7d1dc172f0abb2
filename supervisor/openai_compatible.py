"""openai_compatible: the gateway to a model server of the user's own, speaking OpenAI's chat API upstream.

    upstream, key, models, kind = backend_from_env(os.environ)   # OPENAI_BASE_URL set: "openai-compatible"
    gw = GATEWAYS[kind](upstream=upstream, key=key, models=models, state=Path("backups"), ...)
    rows = list_models(upstream, key)   # python fallback.py --models: [{"model", "owned_by", "context"}]

Ollama (http://localhost:11434/v1), llama.cpp's llama-server, LM Studio and vLLM all serve
POST {base}/chat/completions. The seed keeps speaking Gemini's REST shape: OpenAICompatibleGateway is the same
Gateway (run tokens, the cap, the ledger, retries, learning what a model refuses, cleaning answers up), except:
- Translation both ways. The system instruction and the contents become messages; the answer schema becomes
  response_format json_schema (strict) until a 400 refuses response_format, after which the schema goes as text
  (learned once, as the gateway learns Gemini's features). The answer comes back in Gemini's shape before the
  gateway judges it: leading <think>/<thought> sections as thought parts (dropped), finish_reason "length" as
  MAX_TOKENS (whole files salvaged), usage in Gemini's names. A separate reasoning_content/reasoning field is
  ignored. The seed gets what it would get from Gemini.
- No daily quota and no pacing (models.LOCAL). The prompt budget comes from the context the server runs the
  model with (Ollama's /api/ps or num_ctx, llama.cpp's /props, LM Studio's /api/v1/models, vLLM's /v1/models),
  else OPENAI_CONTEXT_TOKENS, capped by the model's own maximum: PROMPT_SHARE of it for the prompt (less room
  for the schema folded into the text, under the gateway's margin), the rest for the answer, sent as max_tokens.
- What a person can fix stops with one line: the server not running at the start, a model not pulled (404), a
  context too small, a key refused. A server that stops mid-run is a wait, never a rollback.
"""
import math
import os
import re

import requests

from .gateway import (FOLD_TOKENS, MARGIN, RETRY_LATER, TRANSIENT, Gateway, Retry, one_line, stopping, unusable,
                      utc_now)
from .models import DEFAULT_MODELS

# --- settings ---------------------------------------------------------------------------------
GEMINI_API_BASE = "https://generativelanguage.googleapis.com"  # where Gemini lives when GEMINI_API_BASE is unset
CONTEXT_TOKENS = 8192     # the context assumed when the server does not say one (OPENAI_CONTEXT_TOKENS changes it)
PROMPT_SHARE = 0.6        # of the context, for the prompt in real tokens; the rest is the answer's (whole files)
SMALLEST_BUDGET = 3_000   # estimated tokens: the rules, the goal, the tasks and a 150-line seed.py. A model whose
                          # context leaves less (a context under 8,192 tokens) is not planned
ANSWER_TIMEOUT = (3, 840)  # seconds to connect, and to wait for a whole answer (a CPU can take many minutes;
                           # the seed waits 890 s by default)
PROBE_TIMEOUT = (3, 10)   # seconds to connect, and to answer, for what the server says about a model
START_HINT = "start the server (for Ollama: `ollama serve`), or fix OPENAI_BASE_URL in .env"
BASE_HINT = "is OPENAI_BASE_URL right? (for Ollama: http://localhost:11434/v1)"
OVERFLOW = re.compile(r"exceed_context_size|context (size|length|window)", re.I)  # a 400: the prompt did not fit
REFUSED_FORMAT = re.compile(r"response_format|json_schema|json schema", re.I)    # a 400 refusing the schema
# Reasoning at the start of a message: a <think> or <thought> section (to its end if it was cut off), or all
# before a closing tag whose opening tag the chat template put in the prompt (never an answer's own JSON)
THOUGHTS = re.compile(r"\s*<(think|thought)>.*?(?:</\1>|\Z)|(?!\s*[{`]).*?</(?:think|thought)>", re.S)
FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}  # finish_reason as Gemini's finishReason; others in capitals
RAISE = {  # how to give a model the context it needs ({n} tokens), by who said the context it has
    "ollama": "start Ollama with `OLLAMA_CONTEXT_LENGTH={n} ollama serve` (or set num_ctx {n} in a Modelfile)",
    "llama.cpp": "start llama-server with `--ctx-size {n}` for each parallel slot",
    "lm studio": "load it with `lms load {model} --context-length {n}`",
    "listed": "serve it with a longer context (vLLM: `vllm serve {model} --max-model-len {n}`)",
    "model": "that is the model's own maximum: choose a model with a longer context",
    "setting": "set OPENAI_CONTEXT_TOKENS={n} in .env if your server gives the model that much",
}


class OpenAICompatibleGateway(Gateway):
    """The gateway to an OpenAI-compatible server: no quotas, budgets from context lengths, answers translated."""
    local = True
    key_name = "OPENAI_API_KEY"
    model_help = "Set OPENAI_MODEL in .env to models your server has (python fallback.py --models lists them)"

    def __init__(self, upstream, key, models, state, context_tokens=None, limits="", **settings):
        super().__init__(upstream, key, models, state, limits=limits, **settings)
        self.context_tokens = read_context_tokens() if context_tokens is None else context_tokens
        self.contexts = {}    # model -> (context length, who said it: a server kind of RAISE, "model" or "setting")
        self.reached = False  # whether the server ever answered: before, not reaching it means it is not running

    def check_settings(self, upstream, key, models):
        """A ValueError saying which OPENAI_ setting to fix, when one cannot work (a key is optional)."""
        if not re.match(r"https?://[^/\s]+", upstream):
            raise ValueError(f"OPENAI_BASE_URL is not a usable URL: {upstream!r} (for Ollama: "
                             "http://localhost:11434/v1)")
        if not models:
            raise ValueError("OPENAI_MODEL is not set: name the model(s) your server runs, best first, separated by "
                             "commas (python fallback.py --models lists them)")

    # --- which model, and how much may be asked ---------------------------------------------------
    def open_run(self, steering=0):
        """Plan the next run once the server has said each model's context; a server not running stops."""
        return (None if self.stopped else self.ask_contexts()) or super().open_run(steering)

    def ask_contexts(self):
        """Ask the server for each context it has not said yet; a plan to stop or wait when it cannot be reached."""
        for model in self.models:
            if self.contexts.get(model, (None, "setting"))[1] not in ("setting", "model"):
                continue
            try:
                found = read_context(self.upstream, self.key, model, self.context_tokens)
            except requests.RequestException as error:
                return self.unreachable_plan(error)
            with self.lock:
                self.reached, self.contexts[model] = True, found
        return None

    def unreachable_plan(self, error):
        """Stop when the server never answered (it is not running); wait when it stopped after answering."""
        if not self.reached:
            return {"stop": f"cannot reach {self.upstream}: {START_HINT}"}
        return {"wait_until": utc_now() + RETRY_LATER,
                "why": f"cannot reach {self.upstream} ({type(error).__name__}): is the server still running?"}

    def context(self, model):
        """The model's context length, as the server said it, else as the setting has it."""
        return self.contexts.get(model, (self.context_tokens, "setting"))[0]

    def budget(self, model):
        """The largest prompt the seed may send the model: what its context leaves, under the user's cap."""
        return min(self.prompt_tokens, context_budget(self.context(model)))

    def minute_budget(self, model):
        """No input tokens a minute to fit: the context is what bounds a prompt."""
        return math.inf

    def hindrance(self, model, paced=True):
        """Why the model cannot be asked now: a context too small for a useful prompt, or the gateway's reasons."""
        context = self.context(model)
        if context_budget(context) < SMALLEST_BUDGET:
            return "small", None, (f"{model}: a context of {context:,} tokens leaves a prompt of ~"
                                   f"{context_budget(context):,} (the seed needs {SMALLEST_BUDGET:,}): "
                                   + self.how_to_raise(model, context_for(SMALLEST_BUDGET)))
        return super().hindrance(model, paced)

    def how_to_raise(self, model, tokens):
        """How to give the model a context of `tokens`, in the words of whoever said the one it has."""
        return RAISE[self.contexts.get(model, (None, "setting"))[1]].format(n=tokens, model=model)

    # --- the upstream call and its answer ---------------------------------------------------------
    def post(self, model, body):
        """Send the request as a chat completion, leaving the answer its share; a key goes as a bearer token."""
        context = self.context(model)
        chat = as_chat(body, model, context - int(context * PROMPT_SHARE))
        response = requests.post(f"{self.upstream}/chat/completions", json=chat, headers=bearer(self.key),
                                 timeout=ANSWER_TIMEOUT, allow_redirects=False)
        self.reached = True
        return response

    def unreachable(self, error):
        """The server did not answer: try again after a backoff (then the run waits), as if it had stopped."""
        return Retry("server", f"cannot reach {self.upstream} ({type(error).__name__}): is the server still running?")

    def judge(self, run, model, response, call):
        """(kind for the ledger, the clean answer or what to do instead) for the server's response."""
        if response.status_code != 200:
            return self.judge_refusal(model, response.status_code, read_message(response))
        return super().judge(run, model, response, call)

    def judge_answer(self, run, model, body, call):
        """The gateway's judgement of the chat completion, once in Gemini's shape."""
        return super().judge_answer(run, model, as_gemini(body), call)

    def judge_refusal(self, model, code, message):
        """(kind for the ledger, what to do: Retry or a Reply) for an error answer of the server."""
        said = f"{code}: {one_line(message)}"
        if code == 404 or re.search(r"model\b.*\b(not found|does not exist)", message, re.I):
            return "model not found", stopping(self.missing(model, message, said))
        if code in (401, 403):
            return "key refused", stopping(f"the server at {self.upstream} refused the key ({said}): set "
                                           "OPENAI_API_KEY in .env to the key it expects")
        if code == 400 and OVERFLOW.search(message):
            return "context exceeded", stopping(f"{model}: the prompt is over the context the server gives it "
                                                f"({said}): {self.how_to_raise(model, 2 * self.context(model))}")
        if code == 400 and REFUSED_FORMAT.search(message) and self.learn(model, json_mode=False):
            return "feature refused", Retry("adapted", "refused response_format, asking again with the schema as "
                                                       "text", 0)
        if code == 429:
            return self.judge_minute(model, None, None, None)
        if code in TRANSIENT:
            return f"server error {code}", Retry("server", f"answered {said}")
        kind = f"bad request {code}" if 400 <= code < 500 else f"unexpected {code}"
        return kind, unusable(f"the server refused the request ({said})", code if 400 <= code < 500 else 502,
                              "INVALID_ARGUMENT" if 400 <= code < 500 else "INTERNAL")

    def missing(self, model, message, said):
        """One line on a model the server does not have (Ollama's: pull it), or a path it does not serve."""
        if "pull" in message:
            return (f"{model} is not on the server ({said}): pull it with `ollama pull {model}`, or set OPENAI_MODEL "
                    "to a model python fallback.py --models lists")
        if "model" in message.lower():
            return (f"the server at {self.upstream} has no model {model} ({said}): set OPENAI_MODEL to a model "
                    "python fallback.py --models lists")
        return f"the server at {self.upstream} does not serve /chat/completions ({said}): {BASE_HINT}"


GATEWAYS = {"gemini": Gateway, "openai-compatible": OpenAICompatibleGateway}


# --- the keeper's setup -----------------------------------------------------------------------
def backend_from_env(environ):
    """(upstream, key, models, kind): the server at OPENAI_BASE_URL when that is set, else Gemini."""
    if environ.get("OPENAI_BASE_URL", "").strip():
        return (environ["OPENAI_BASE_URL"].strip().rstrip("/"), environ.get("OPENAI_API_KEY", "").strip(),
                names(environ.get("OPENAI_MODEL", "")), "openai-compatible")
    return (environ.get("GEMINI_API_BASE", "").strip() or GEMINI_API_BASE, environ.get("GEMINI_API_KEY", "").strip(),
            names(environ.get("GEMINI_MODEL", "").strip() or DEFAULT_MODELS), "gemini")


def read_context_tokens():
    """OPENAI_CONTEXT_TOKENS as a number (CONTEXT_TOKENS when unset); a ValueError saying how to write it."""
    text = os.environ.get("OPENAI_CONTEXT_TOKENS", "").strip()
    if not text:
        return CONTEXT_TOKENS
    if not text.isdigit() or int(text) == 0:
        raise ValueError(f"OPENAI_CONTEXT_TOKENS is not a number of tokens: {text!r} (for example 16384)")
    return int(text)


def list_models(base, key=""):
    """What the server offers, as rows for `python fallback.py --models`: {"model", "owned_by", "context"}."""
    try:
        response = requests.get(f"{base.rstrip('/')}/models", headers=bearer(key), timeout=PROBE_TIMEOUT)
    except requests.RequestException as error:
        raise ConnectionError(f"cannot reach {base} ({type(error).__name__}): {START_HINT}") from None
    data = (json_of(response) or {}).get("data")
    if response.status_code != 200 or not isinstance(data, list):
        fix = "set OPENAI_API_KEY in .env to the key it expects" if response.status_code in (401, 403) else BASE_HINT
        raise ValueError(f"the server at {base} did not list its models ({response.status_code}: "
                         f"{one_line(read_message(response))[:200]}): {fix}")
    return [{"model": str(entry["id"]), "owned_by": str(entry.get("owned_by") or ""),
             "context": listed_context_of(entry)} for entry in data if isinstance(entry, dict) and entry.get("id")]


# --- budgets ------------------------------------------------------------------------------------
def context_budget(context):
    """The prompt budget a context leaves, in the gateway's estimated tokens: its prompt share, less the room for
    a schema folded into the text, under the margin by which such estimates undercount code."""
    return max(0, int((context * PROMPT_SHARE - FOLD_TOKENS) / MARGIN))


def context_for(budget):
    """The smallest context, in whole multiples of 1,024 tokens, that leaves this budget."""
    return math.ceil((budget * MARGIN + FOLD_TOKENS) / PROMPT_SHARE / 1024) * 1024


def read_context(base, key, model, setting):
    """(the model's context, who said it): the first server kind that answers for it; else the setting
    ("setting"), or the model's own maximum when that is smaller ("model"). Connection errors propagate."""
    root = re.sub(r"/v1$", "", base)
    for source, probe in PROBES:
        said = probe(root, base, key, model)
        if said and said[0]:
            return said[0], source
        if said:
            return (said[1], "model") if said[1] and said[1] < setting else (setting, "setting")
    return setting, "setting"


def ollama_context(root, base, key, model):
    """Ollama: the context of the model loaded now (/api/ps), else its Modelfile's num_ctx; its maximum."""
    show = fetch(f"{root}/api/show", key, {"model": model})
    if show is None:
        return None
    loaded = [entry.get("context_length") for entry in entries(fetch(f"{root}/api/ps", key), "models")
              if {entry.get("name"), entry.get("model")} & {model, f"{model}:latest"}]
    num_ctx = re.search(r"^num_ctx\s+(\d+)", str(show.get("parameters", "")), re.M)
    info = show.get("model_info") if isinstance(show.get("model_info"), dict) else {}
    maximum = next((value for name, value in info.items() if name.endswith(".context_length")), None)
    return positive(loaded[0] if loaded else None) or (int(num_ctx.group(1)) if num_ctx else None), positive(maximum)


def llama_cpp_context(root, base, key, model):
    """llama.cpp's llama-server: the context of each of its slots (/props); it serves the one model it loaded."""
    settings = (fetch(f"{root}/props", key) or {}).get("default_generation_settings")
    return (positive(settings.get("n_ctx")), None) if isinstance(settings, dict) else None


def lm_studio_context(root, base, key, model):
    """LM Studio: the context the model is loaded with, and its maximum (/api/v1/models)."""
    for entry in entries(fetch(f"{root}/api/v1/models", key), "models"):
        if entry.get("key") == model:
            loaded = [instance.get("config", {}).get("context_length") for instance in
                      entry.get("loaded_instances") or [] if isinstance(instance, dict)]
            return positive(loaded[0] if loaded else None), positive(entry.get("max_context_length"))
    return None


def listed_context(root, base, key, model):
    """A server whose model list states a model's context (vLLM's max_model_len, among others)."""
    for entry in entries(fetch(f"{base}/models", key), "data"):
        if entry.get("id") == model and listed_context_of(entry):
            return listed_context_of(entry), None
    return None


PROBES = (("ollama", ollama_context), ("llama.cpp", llama_cpp_context), ("lm studio", lm_studio_context),
          ("listed", listed_context))


def listed_context_of(entry):
    """The context a model list's entry states: vLLM's max_model_len, llama.cpp's meta.n_ctx, or context_length."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    return positive(entry.get("max_model_len") or entry.get("context_length") or meta.get("n_ctx"))


# --- the request --------------------------------------------------------------------------------
def as_chat(body, model, room):
    """A generateContent body, as the gateway adapted it, as a chat completion leaving `room` tokens to answer."""
    system = body.get("systemInstruction")
    system = [{"role": "system", "content": text_of(system)}] if system else []
    turns = [{"role": "assistant" if content.get("role") == "model" else "user", "content": text_of(content)}
             for content in body["contents"]]
    config, chat = body.get("generationConfig") or {}, {"model": model, "messages": system + turns, "stream": False}
    wanted = config.get("maxOutputTokens")
    chat["max_tokens"] = min(room, wanted) if isinstance(wanted, int) and wanted > 0 else room
    if isinstance(config.get("temperature"), (int, float)):
        chat["temperature"] = config["temperature"]
    if config.get("responseMimeType") == "application/json":
        chat["response_format"] = response_format(config.get("responseJsonSchema") or config.get("responseSchema"))
    return chat


def text_of(content):
    return "\n\n".join(part["text"] for part in content["parts"] if isinstance(part.get("text"), str))


def response_format(schema):
    """The answer schema as OpenAI's structured output (JSON alone when the request named no schema)."""
    if not schema:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": json_schema(schema), "strict": True}}


def json_schema(schema):
    """Gemini's answer schema (OpenAPI's types, in capitals) as a JSON Schema (types in small letters)."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {name: value.lower() if name == "type" and isinstance(value, str) else json_schema(value)
            for name, value in schema.items()}


# --- the answer ---------------------------------------------------------------------------------
def as_gemini(body):
    """A chat completion in generateContent's shape: reasoning as a thought part, finish reason and usage renamed."""
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    thought, text = split_thoughts(message.get("content") if isinstance(message.get("content"), str) else "")
    parts = ([{"text": thought, "thought": True}] if thought else []) + [{"text": text}]
    finish = choice.get("finish_reason")
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": FINISH.get(finish, str(finish).upper())}],
            "usageMetadata": usage_of(body.get("usage")), "modelVersion": body.get("model")}


def split_thoughts(text):
    """(the reasoning a message starts with, the rest)."""
    match = THOUGHTS.match(text)
    return (match.group(), text[match.end():]) if match else ("", text)


def usage_of(usage):
    """OpenAI's usage in Gemini's names: the prompt, the answer without reasoning, the reasoning as thoughts."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("completion_tokens_details") if isinstance(usage.get("completion_tokens_details"), dict) else {}
    thinking = positive(details.get("reasoning_tokens")) or 0
    return {"promptTokenCount": positive(usage.get("prompt_tokens")) or 0, "thoughtsTokenCount": thinking,
            "candidatesTokenCount": max(0, (positive(usage.get("completion_tokens")) or 0) - thinking)}


def read_message(response):
    """The message of an error answer, whatever its shape: OpenAI's, LM Studio's or Ollama's string, or text."""
    body = json_of(response)
    error = body.get("error", body) if body else response.text[:500]
    if isinstance(error, dict):
        error = error.get("message") or error.get("detail") or error
    return str(error)


# --- small things -------------------------------------------------------------------------------
def fetch(url, key, body=None):
    """The JSON object the server answers at url (POSTing body, if any), or None for anything else; a server
    too busy to answer says nothing, a server that cannot be reached raises."""
    try:
        response = requests.request("POST" if body else "GET", url, json=body, headers=bearer(key),
                                    timeout=PROBE_TIMEOUT, allow_redirects=False)
    except requests.ReadTimeout:
        return None
    return json_of(response) if response.status_code == 200 else None


def json_of(response):
    try:
        value = response.json()
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def entries(body, name):
    """The objects listed under `name` in a body (none when it is missing or odd)."""
    listed = (body or {}).get(name)
    return [entry for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) else []


def positive(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def bearer(key):
    return {"Authorization": f"Bearer {key}"} if key else {}


def names(text):
    return [name.strip() for name in text.split(",") if name.strip()]
