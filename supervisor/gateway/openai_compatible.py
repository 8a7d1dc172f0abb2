"""openai_compatible: the gateway's backend for a model server of the user's own, speaking OpenAI's chat API.

    backend = OpenAICompatible(upstream, key, models, context_tokens=None)   # OPENAI_BASE_URL and friends
    backend.prepare(models)                  # asks the server each model's context; a plan to stop or wait
    backend.ask(model, body, facts)          # an outcomes.Reading for one chat completion
    list_models(base, key)                   # python fallback.py --models: [{"model", "owned_by", "context"}]

Ollama (http://localhost:11434/v1), llama.cpp's llama-server, llama-cpp-python, LM Studio, vLLM and LiteLLM's
proxy all serve POST {base}/chat/completions. The seed keeps speaking Gemini's REST shape; this file translates:
- The system instruction and the contents become messages. A model is asked in OPENAI_ANSWER_FORMAT: "files"
  (the default: plain text with <file path> blocks, which answers.adapt asks for; small models write code in
  JSON strings badly) or "json": the schema as response_format json_schema (strict: every property required,
  no others); after a server refuses that (by what its error says, whatever its status: llama-cpp-python
  answers 500), json_object with the schema (llama-cpp-python makes it a grammar); after that too, as text.
  The answer is streamed (streaming.py: a runaway is stopped, and an ended run closes the request) and comes
  back in Gemini's shape: leading <think>/<thought> sections as thought parts, finish_reason "length" as
  MAX_TOKENS, usage in Gemini's names; a reasoning_content field is ignored.
- No daily quota and no pacing (models.LOCAL). The prompt budget comes from the context the server runs the
  model with (Ollama's /api/ps, after an empty /api/generate loads it, or num_ctx; llama.cpp's /props; LM
  Studio's /api/v1/models; LiteLLM's /v1/model/info or a model list's max_input_tokens; vLLM's max_model_len),
  else OPENAI_CONTEXT_TOKENS, capped by the model's own maximum: PROMPT_SHARE of it for the prompt, the rest
  for the answer (max_tokens). A context an overflow error states is learned and the next run fits it.
- Errors are read by what they say: a model the server does not have (404, or LiteLLM's 400 "Invalid model
  name"), a key refused (401/403, or words about the key or its database), a context too small; each stops
  with one line saying what to set. A server not running at the start stops; one that stops mid-run is a wait.
"""
import functools
import math
import os
import re
from datetime import timedelta

import requests

from .answers import FOLD_TOKENS, MARGIN
from .outcomes import TAPE, Kind, Plan, Reading, TooLarge, fetch_bounded, json_of, names, one_line, utc_now
from .streaming import STREAM, reader

# --- settings ---------------------------------------------------------------------------------
CONTEXT_TOKENS = 8192     # the context assumed when the server does not say one (OPENAI_CONTEXT_TOKENS changes it)
PROMPT_SHARE = 0.6        # of the context, for the prompt in real tokens; the rest is the answer's (whole files)
SMALLEST_BUDGET = 3_000   # estimated tokens: the rules, the goal, the tasks and a 150-line seed.py. A model whose
                          # context leaves less (a context under 8,192 tokens) is not planned
ANSWER_TIMEOUT = (3, 840)  # seconds to connect, and to wait for the next byte of an answer (a CPU can read a long
                           # prompt for minutes before its first token); the seed's own time bounds the whole
PROBE_TIMEOUT = (3, 10)   # seconds to connect, and to answer, for what the server says about a model
LOAD_TIMEOUT = (3, 300)   # seconds for Ollama to load a model into memory (an empty /api/generate)
BARE_429_WAIT = 60.0      # seconds to wait after a 429 (local servers say no more)
RETRY_LATER_MINUTES = 5   # minutes to wait when the server stopped answering after it had answered
TRANSIENT = {408, 500, 502, 503, 504}
ANSWER_FORMATS = ("files", "json")  # how answers are asked for (OPENAI_ANSWER_FORMAT; the first is the default):
# plain text with <file path> blocks (small models write code in JSON strings badly: bench/real_model.py), or the
# seed's JSON schema as response_format
START_HINT = "start the server (for Ollama: `ollama serve`), or fix OPENAI_BASE_URL in .env"
BASE_HINT = "is OPENAI_BASE_URL right? (for Ollama: http://localhost:11434/v1)"
KEY_FIX = "set OPENAI_API_KEY in .env to the key it expects (LiteLLM's proxy: its master key or a virtual key)"
OVERFLOW = re.compile(r"exceed_context_size|context (size|length|window)|ContextWindowExceeded|too many tokens", re.I)
REFUSED_FORMAT = re.compile(r"response_format|json_schema|json schema|'text' or 'json_object'", re.I)
MISSING = re.compile(r"model\b.*\b(not found|does not exist)|invalid model name|model_not_found|no such model", re.I)
KEY_WORDS = re.compile(r"api[ _-]?key|authenticat|unauthori[sz]ed|credential|bearer|virtual key|master key"
                       r"|no connected db|no_db_connection|invalid (proxy server )?token", re.I)
STATED_CONTEXT = re.compile(r"(?:context window of|maximum context length is|context size \(|n_ctx\W+)\s*(\d+)", re.I)
# Reasoning at the start of a message: a <think> or <thought> section (to its end if it was cut off), or all
# before a closing tag whose opening tag the chat template put in the prompt (never an answer's own JSON)
THOUGHTS = re.compile(r"\s*<(think|thought)>.*?(?:</\1>|\Z)|(?!\s*[{`]).*?</(?:think|thought)>", re.S)
FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}  # finish_reason as Gemini's finishReason; others in capitals
RAISE = {  # how to give a model the context it needs ({n} tokens), by who said the context it has
    "ollama": "start Ollama with `OLLAMA_CONTEXT_LENGTH={n} ollama serve` (or set num_ctx {n} in a Modelfile)",
    "llama.cpp": "start llama-server with `--ctx-size {n}` for each parallel slot",
    "lm studio": "load it with `lms load {model} --context-length {n}`",
    "litellm": "raise max_input_tokens in the model's model_info in LiteLLM's config to {n}, if the model behind it "
               "takes that much",
    "listed": "serve it with a longer context (vLLM: `vllm serve {model} --max-model-len {n}`)",
    "error": "start the server with a context of {n} tokens (llama-cpp-python: `--n_ctx {n}`; llama-server: "
             "`--ctx-size {n}`)",
    "model": "that is the model's own maximum: choose a model with a longer context",
    "setting": "set OPENAI_CONTEXT_TOKENS={n} in .env if your server gives the model that much",
}


def chosen_by(environ):
    """A server of the user's own serves when OPENAI_BASE_URL is set."""
    return bool(environ.get("OPENAI_BASE_URL", "").strip())


def from_env(environ):
    """The backend as the settings in `environ` describe it."""
    return OpenAICompatible(environ["OPENAI_BASE_URL"].strip().rstrip("/"), environ.get("OPENAI_API_KEY", "").strip(),
                            names(environ.get("OPENAI_MODEL", "")), read_context_tokens(environ),
                            read_answer_format(environ))


def chosen_models(environ):
    return names(environ.get("OPENAI_MODEL", ""))


class OpenAICompatible:
    """An OpenAI-compatible server: no quotas, budgets from context lengths, requests and answers translated."""
    local, limits = True, ""  # no quotas: GEMINI_LIMITS is not this backend's
    key_name = "OPENAI_API_KEY"
    model_help = "Set OPENAI_MODEL in .env to models your server has (python fallback.py --models lists them)"

    def __init__(self, upstream, key, models, context_tokens=None, answer_format=ANSWER_FORMATS[0]):
        if not re.match(r"https?://[^/\s]+", upstream):
            raise ValueError(f"OPENAI_BASE_URL is not a usable URL: {upstream!r} (for Ollama: "
                             "http://localhost:11434/v1)")
        if not models:
            raise ValueError("OPENAI_MODEL is not set: name the model(s) your server runs, best first, separated by "
                             "commas (python fallback.py --models lists them)")
        self.upstream, self.key, self.models = upstream.rstrip("/"), key, models
        self.answer_format = answer_format  # what answers.adapt asks the model for: "files" or "json"
        self.context_tokens = read_context_tokens(os.environ) if context_tokens is None else context_tokens
        self.contexts = {}    # model -> (context, who said it: a key of RAISE, the model's maximum or None)
        self.reached = False  # whether the server ever answered: before, not reaching it means it is not running
        self.listed = None    # the models the server lists (None: it did not say)
        self.silent = set()   # models no probe could say anything about (llama-cpp-python): not probed again

    # --- which model, and how much may be asked ---------------------------------------------------
    def prepare(self, models):
        """Ask the server for each context it has not said yet, and whether it takes the key; a plan to stop or
        wait when it cannot be reached or refuses the key."""
        for model in models:
            if self.contexts.get(model, (None, "setting"))[1] not in ("setting", "model") or model in self.silent:
                continue
            try:
                if not self.reached:
                    refused, self.listed = read_model_list(self.upstream, self.key)
                    if refused:
                        return Plan(stop=refused)
                found = read_context(self.upstream, self.key, model, self.context_tokens)
            except requests.RequestException as error:
                return self.unreachable_plan(error)
            self.reached, self.contexts[model] = True, found
            if found[1:] == ("setting", None):  # no probe knew the server: asking again each run cannot change that
                self.silent.add(model)
        return None

    def unreachable_plan(self, error):
        """Stop when the server never answered (it is not running); wait when it stopped after answering."""
        if not self.reached:
            return Plan(stop=f"cannot reach {self.upstream}: {START_HINT}")
        return Plan(wait_until=utc_now() + timedelta(minutes=RETRY_LATER_MINUTES),
                    why=f"cannot reach {self.upstream} ({type(error).__name__}): is the server still running?")

    def context(self, model):
        """The model's context length, as the server said it, else as the setting has it."""
        return self.contexts.get(model, (self.context_tokens, "setting"))[0]

    def room(self, model, facts):
        """The largest prompt the model's context leaves, in estimated tokens."""
        return context_budget(self.context(model))

    def hindrance(self, model, facts):
        """One line when the model's context is too small for a useful prompt, or when the server does not list the
        model and nothing said its context (a request would fail), else None."""
        context = self.context(model)
        if self.unlisted(model) and self.source(model) == "setting":
            return f"{model}: the server does not list it (it has {', '.join(self.listed[:5]) or 'none'})"
        if context_budget(context) < SMALLEST_BUDGET:
            return (f"{model}: a context of {context:,} tokens leaves a prompt of ~{context_budget(context):,} (the "
                    f"seed needs {SMALLEST_BUDGET:,}): {self.unlisted(model)}"
                    + self.how_to_raise(model, context_for(SMALLEST_BUDGET)))
        return None

    def make_room(self, model, tokens):
        """How to give a prompt of `tokens` room: a longer context where the server can give one, or less text."""
        if self.unlisted(model):
            return self.unlisted(model) + "or shorten them"
        if self.source(model) == "model":
            return f"{self.how_to_raise(model, 0)}, or shorten them"
        return f"shorten them, or give the model a longer context: {self.how_to_raise(model, context_for(tokens))}"

    def unlisted(self, model):
        """The first words of a stop about a model the server does not list (its context is then no one's), or ""."""
        if self.listed is None or {model, f"{model}:latest"} & set(self.listed):
            return ""
        return (f"the server does not list {model} (it has {', '.join(self.listed[:5]) or 'none'}): set OPENAI_MODEL to "
                "a model python fallback.py --models lists; ")

    def source(self, model):
        return self.contexts.get(model, (None, "setting"))[1]

    def how_to_raise(self, model, tokens):
        """How to give the model a context of `tokens`, in the words of whoever said the one it has; never more than
        the model's own maximum."""
        maximum = self.contexts.get(model, (None, None, None))[2]
        if maximum and tokens > maximum:
            return RAISE["model"].format(n=maximum, model=model) + f" ({maximum:,} tokens)"
        return RAISE[self.source(model)].format(n=tokens, model=model)

    # --- the upstream call and its answer ---------------------------------------------------------
    def ask(self, model, body, facts):
        """The outcome of one chat completion, the answer given the room its context leaves."""
        context = self.context(model)
        room = context - int(context * PROMPT_SHARE)
        chat = {**as_chat(body, model, room, facts), **STREAM}
        try:
            response = fetch_bounded("POST", f"{self.upstream}/chat/completions", chat, bearer(self.key),
                                     ANSWER_TIMEOUT, reader(getattr(TAPE, "over", None)))
            if response.status_code == 200 and not response.content:  # llama-cpp-python streams nothing when it
                unstreamed = {k: v for k, v in chat.items() if k not in STREAM}  # fails before a token: unstreamed,
                response = fetch_bounded("POST", f"{self.upstream}/chat/completions", unstreamed,  # it says why
                                         bearer(self.key), ANSWER_TIMEOUT)
        except TooLarge as error:
            return Reading(Kind.UNUSABLE, "unusable answer", f"the server sent {error}: not read")
        except requests.RequestException as error:
            return Reading(Kind.RETRY_LATER, "network error", f"cannot reach {self.upstream} ({type(error).__name__}): "
                                                              "is the server still running?")
        self.reached = True
        if response.status_code != 200:
            return self.read_refusal(model, response.status_code, read_message(response), chat)
        body = json_of(response)
        if body is None:
            return Reading(Kind.UNUSABLE, "unusable answer", f"the server's answer is not a JSON object: "
                                                              f"{response.text[:80]!r}")
        return Reading(Kind.ANSWER, "answer", body=as_gemini(body))

    def read_refusal(self, model, code, message, chat):
        """The outcome an error answer means, by what it says as much as by its status; `chat` is what was sent."""
        said = f"{code}: {one_line(message)}"
        if code in (401, 403) or KEY_WORDS.search(message):
            return Reading(Kind.KEY_REFUSED, "key refused", f"the server at {self.upstream} refused the key ({said}): "
                                                             + KEY_FIX)
        if code == 404 or MISSING.search(message):
            return Reading(Kind.MODEL_NOT_FOUND, "model not found", self.missing(model, message, said))
        if OVERFLOW.search(message):
            return self.overflow(model, message, said)
        if REFUSED_FORMAT.search(message) and "response_format" in chat:  # json_schema first, then json_object
            feature = "json_schema" if chat["response_format"]["type"] == "json_schema" else "json_mode"
            return Reading(Kind.REFUSED_FEATURE, "feature refused", f"the server refused the request ({said})",
                           feature=feature, status=code if 400 <= code < 500 else 502)
        if code == 429:
            return Reading(Kind.RETRY_LATER, "429 without details", "per-minute limit (429 without details)",
                           delay=BARE_429_WAIT)
        if code in TRANSIENT:
            return Reading(Kind.RETRY_LATER, f"server error {code}", f"answered {said}")
        return Reading(Kind.UNUSABLE, f"bad request {code}" if 400 <= code < 500 else f"unexpected {code}",
                       f"the server refused the request ({said})", status=code if 400 <= code < 500 else 502)

    def overflow(self, model, message, said):
        """A prompt over the context: the context the error states is learned (the next run fits it); else a stop
        saying how to raise it, never beyond what the server gives."""
        stated = STATED_CONTEXT.search(message)
        context, source, maximum = self.contexts.get(model, (self.context(model), "setting", None))
        if stated and 0 < int(stated.group(1)) < context:
            self.contexts[model] = (int(stated.group(1)), "error" if source == "setting" else source, maximum)
            return Reading(Kind.CONTEXT_TOO_SMALL, "context exceeded", f"{model}: the prompt is over the context the "
                           f"server gives it ({said}): the next run is budgeted to {int(stated.group(1)):,} tokens",
                           replan=True)
        fix = (f"lower OPENAI_CONTEXT_TOKENS (now {context:,}) to the context your server gives the model, or start "
               "the server with a longer one") if source == "setting" else self.how_to_raise(model, 2 * context)
        return Reading(Kind.CONTEXT_TOO_SMALL, "context exceeded",
                       f"{model}: the prompt is over the context the server gives it ({said}): {fix}")

    def missing(self, model, message, said):
        """One line on a model the server does not have (Ollama's: pull it), or a path it does not serve."""
        if "pull" in message:
            return (f"{model} is not on the server ({said}): pull it with `ollama pull {model}`, or set OPENAI_MODEL "
                    "to a model python fallback.py --models lists")
        if "model" in message.lower():
            return (f"the server at {self.upstream} has no model {model} ({said}): set OPENAI_MODEL to a model "
                    "python fallback.py --models lists")
        return f"the server at {self.upstream} does not serve /chat/completions ({said}): {BASE_HINT}"


# --- the keeper's setup -----------------------------------------------------------------------
def read_answer_format(environ):
    """OPENAI_ANSWER_FORMAT (ANSWER_FORMATS[0] when unset); a ValueError naming the values it takes."""
    text = environ.get("OPENAI_ANSWER_FORMAT", "").strip().lower() or ANSWER_FORMATS[0]
    if text not in ANSWER_FORMATS:
        raise ValueError(f"OPENAI_ANSWER_FORMAT is {text!r}: it takes {' or '.join(ANSWER_FORMATS)}")
    return text


def read_context_tokens(environ):
    """OPENAI_CONTEXT_TOKENS as a number (CONTEXT_TOKENS when unset); a ValueError saying how to write it."""
    text = environ.get("OPENAI_CONTEXT_TOKENS", "").strip()
    if not text:
        return CONTEXT_TOKENS
    if not text.isdigit() or int(text) == 0:
        raise ValueError(f"OPENAI_CONTEXT_TOKENS is not a number of tokens: {text!r} (for example 16384)")
    return int(text)


def list_models(base, key=""):
    """What the server offers, as rows for `python fallback.py --models`: {"model", "owned_by", "context"}."""
    try:
        response = fetch_bounded("GET", f"{base.rstrip('/')}/models", None, bearer(key), PROBE_TIMEOUT)
    except requests.RequestException as error:
        raise ConnectionError(f"cannot reach {base} ({type(error).__name__}): {START_HINT}") from None
    data = (json_of(response) or {}).get("data")
    if response.status_code != 200 or not isinstance(data, list):
        message = one_line(read_message(response))[:200]
        fix = KEY_FIX if refuses_key(response.status_code, message, key) else BASE_HINT
        raise ValueError(f"the server at {base} did not list its models ({response.status_code}: {message}): {fix}")
    return [{"model": str(entry["id"]), "owned_by": str(entry.get("owned_by") or ""),
             "context": listed_context_of(entry)} for entry in data if isinstance(entry, dict) and entry.get("id")]


def show_models(environ):
    """Print what the server at OPENAI_BASE_URL offers, with each model's context where it says."""
    chosen = chosen_models(environ)
    rows = list_models(environ["OPENAI_BASE_URL"].strip(), environ.get("OPENAI_API_KEY", "").strip())
    print(f"{'model':<40} {'context':>9}  in OPENAI_MODEL")
    for row in rows:
        context = f"{row['context']:,}" if row["context"] else "?"
        print(f"{row['model']:<40} {context:>9}  {'yes' if row['model'] in chosen else ''}")


def refuses_key(code, message, key):
    """Whether an error answer is about the key: 401/403, words about a key, or a bare 500 to a request without one
    (LiteLLM's proxy answers a missing key so)."""
    return code in (401, 403) or bool(KEY_WORDS.search(message)) or \
        (not key and code == 500 and message.strip() == "Internal Server Error")


def read_model_list(base, key):
    """(one line when the server's model list refuses the key, else None; the ids it lists, or None), asked before
    any chat is spent."""
    response = fetch_bounded("GET", f"{base}/models", None, bearer(key), PROBE_TIMEOUT)
    message, data = one_line(read_message(response))[:200], (json_of(response) or {}).get("data")
    if response.status_code != 200 and refuses_key(response.status_code, message, key):
        refused = "refused the key" if key else "wants a key (OPENAI_API_KEY is not set)"
        return f"the server at {base} {refused} ({response.status_code}: {message}): {KEY_FIX}", None
    if response.status_code != 200 or not isinstance(data, list):
        return None, None
    return None, [str(entry["id"]) for entry in data if isinstance(entry, dict) and entry.get("id")]


# --- budgets ------------------------------------------------------------------------------------
def context_budget(context):
    """The prompt budget a context leaves, in the gateway's estimated tokens: its prompt share, less the room for
    a schema folded into the text, under the margin by which such estimates undercount code."""
    return max(0, int((context * PROMPT_SHARE - FOLD_TOKENS) / MARGIN))


def context_for(budget):
    """The smallest context, in whole multiples of 1,024 tokens, that leaves this budget."""
    return math.ceil((budget * MARGIN + FOLD_TOKENS) / PROMPT_SHARE / 1024) * 1024


def read_context(base, key, model, setting):
    """(the model's context, who said it, the model's maximum or None): the first server kind that answers for
    it; else the setting ("setting"), or the model's own maximum when that is smaller ("model"). Connection
    errors propagate."""
    root = re.sub(r"/v1$", "", base)
    for source, probe in PROBES:
        said = probe(root, base, key, model)
        if said and said[0]:
            return min(said[0], said[1] or said[0]), source, said[1]
        if said:
            return ((said[1], "model") if said[1] and said[1] < setting else (setting, "setting")) + (said[1],)
    return setting, "setting", None


def ollama_context(root, base, key, model):
    """Ollama: the context of the model loaded now (/api/ps; an empty /api/generate loads it, as after every start
    of Ollama), else its Modelfile's num_ctx; its trained maximum (/api/show)."""
    show = fetch(f"{root}/api/show", key, {"model": model})
    if show is None:
        return None
    loaded = ollama_loaded(root, key, model)
    if not loaded and fetch(f"{root}/api/generate", key, {"model": model}, LOAD_TIMEOUT) is not None:
        loaded = ollama_loaded(root, key, model)
    num_ctx = re.search(r"^num_ctx\s+(\d+)", str(show.get("parameters", "")), re.M)
    info = show.get("model_info") if isinstance(show.get("model_info"), dict) else {}
    maximum = next((value for name, value in info.items() if name.endswith(".context_length")), None)
    return positive(loaded[0] if loaded else None) or (int(num_ctx.group(1)) if num_ctx else None), positive(maximum)


def ollama_loaded(root, key, model):
    """The contexts /api/ps says the model runs with (none while it is not loaded)."""
    return [entry.get("context_length") for entry in entries(fetch(f"{root}/api/ps", key), "models")
            if {entry.get("name"), entry.get("model")} & {model, f"{model}:latest"}]


def llama_cpp_context(root, base, key, model):
    """llama.cpp's llama-server: the context of each of its slots (/props), and the one it was trained with
    (/v1/models' meta.n_ctx_train); it serves the one model it loaded."""
    settings = (fetch(f"{root}/props", key) or {}).get("default_generation_settings")
    if not isinstance(settings, dict):
        return None
    metas = [entry.get("meta") for entry in entries(fetch(f"{base}/models", key), "data")]
    trained = [positive(meta.get("n_ctx_train")) for meta in metas if isinstance(meta, dict)]
    return positive(settings.get("n_ctx")), trained[0] if trained else None


def lm_studio_context(root, base, key, model):
    """LM Studio: the context the model is loaded with, and its maximum (/api/v1/models)."""
    for entry in entries(fetch(f"{root}/api/v1/models", key), "models"):
        if entry.get("key") == model:
            loaded = [instance.get("config", {}).get("context_length") for instance in
                      entry.get("loaded_instances") or [] if isinstance(instance, dict)]
            return positive(loaded[0] if loaded else None), positive(entry.get("max_context_length"))
    return None


def listed_context(root, base, key, model, path="models", name="id"):
    """A server whose model list states a model's context (vLLM's max_model_len, among others), or whose list at
    `path` names it by `name` with its context in model_info (LiteLLM's /v1/model/info: max_input_tokens, as its
    config or its model map has it)."""
    for entry in entries(fetch(f"{base}/{path}", key), "data"):
        info = entry.get("model_info") if isinstance(entry.get("model_info"), dict) else entry
        if entry.get(name) == model and listed_context_of(info):
            return listed_context_of(info), None
    return None


PROBES = (("ollama", ollama_context), ("llama.cpp", llama_cpp_context), ("lm studio", lm_studio_context),
          ("litellm", functools.partial(listed_context, path="model/info", name="model_name")),
          ("listed", listed_context))


def listed_context_of(entry):
    """The context a model list's entry states: vLLM's max_model_len, llama.cpp's meta.n_ctx, context_length, or
    LiteLLM's max_input_tokens."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    return positive(entry.get("max_model_len") or entry.get("context_length") or meta.get("n_ctx")
                    or entry.get("max_input_tokens"))


# --- the request --------------------------------------------------------------------------------
def as_chat(body, model, room, facts):
    """A generateContent body, as the gateway adapted it, as a chat completion leaving `room` tokens to answer."""
    system = body.get("systemInstruction")
    system = [{"role": "system", "content": text_of(system)}] if system else []
    turns = [{"role": "assistant" if content.get("role") == "model" else "user", "content": text_of(content)}
             for content in body["contents"]]
    config, chat = body.get("generationConfig") or {}, {"model": model, "messages": system + turns}
    wanted = config.get("maxOutputTokens")
    chat["max_tokens"] = min(room, wanted) if isinstance(wanted, int) and wanted > 0 else room
    if "temperature" in config:  # the seed's choice (the genesis seed asks small models 0.2); never the keeper's
        chat["temperature"] = config["temperature"]
    if config.get("responseMimeType") == "application/json":
        chat["response_format"] = response_format(config.get("responseJsonSchema") or config.get("responseSchema"),
                                                  facts["json_schema"])
    return chat


def text_of(content):
    return "\n\n".join(part["text"] for part in content["parts"] if isinstance(part.get("text"), str))


def response_format(schema, structured=True):
    """The answer schema as OpenAI's structured output; for a server that refused it, json_object with the schema
    (llama-cpp-python turns it into a grammar); JSON alone when the request named no schema."""
    if not schema:
        return {"type": "json_object"}
    if not structured:
        return {"type": "json_object", "schema": json_schema(schema)}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": json_schema(schema), "strict": True}}


def json_schema(schema):
    """Gemini's answer schema (OpenAPI's types, in capitals) as a strict JSON Schema: types in small letters, and
    each object with every property required and no others (what OpenAI's strict mode requires)."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {name: value.lower() if name == "type" and isinstance(value, str) else json_schema(value)
                 for name, value in schema.items()}
    if isinstance(converted.get("properties"), dict):
        converted.update(required=list(converted["properties"]), additionalProperties=False)
    return converted


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
def fetch(url, key, body=None, timeout=PROBE_TIMEOUT):
    """The JSON object the server answers at url (POSTing body, if any), or None for anything else; a server
    too busy to answer says nothing, a server that cannot be reached raises."""
    try:
        response = fetch_bounded("POST" if body else "GET", url, body, bearer(key), timeout)
    except (requests.ReadTimeout, TooLarge):
        return None
    return json_of(response) if response.status_code == 200 else None


def entries(body, name):
    """The objects listed under `name` in a body (none when it is missing or odd)."""
    listed = (body or {}).get(name)
    return [entry for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) else []


def positive(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def bearer(key):
    return {"Authorization": f"Bearer {key}"} if key else {}
