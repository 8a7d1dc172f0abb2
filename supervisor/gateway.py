"""gateway: the only door to the model. It holds the API key and decides what may be asked, of whom, and when.

    gw = Gateway(upstream=API_BASE, key=KEY, models=["gemini-3.5-flash", ...], state=Path("backups"))
    gw.start()                          # a loopback server speaking Gemini's REST shape, at gw.url
    plan = gw.open_run(steering)        # {"token", "model", "budget"}, or {"wait_until", "why"}, or {"stop"}
    ...                                 # the seed runs with GEMINI_API_BASE=gw.url, GEMINI_API_KEY=plan["token"]
    report = gw.close_run(plan["token"])  # what the run asked, spent, got, refused; any problem
    gw.close()

The seed POSTs /v1beta/models/{any}:generateContent with its run's token; the gateway asks the run's
model with the real key (sent only in the x-goog-api-key header, redacted from every message), and
answers either 200 with a clean answer (the JSON object alone, thought parts dropped, lazy files
removed, what came whole salvaged from an answer cut off) or a Gemini-shaped error. Its rules:
- A request that cannot succeed is never sent: not to a model whose day is spent (until midnight
  Pacific) or that answered 404 (for a day), not a prompt over the model's input tokens a minute, not
  with a feature the model refuses (models.py: JSON mode and the system instruction are folded into the
  text of a model without them; thinking settings are never sent).
- Each model is paced to its requests and input tokens a minute (a sliding window, kept across restarts).
- A model is planned only if its budget holds the person's steering (the characters of goal.md and the open
  tasks that every prompt carries) and room for code besides.
- What can succeed is retried: 5xx, 408 and network errors with backoff, a per-minute 429 after its
  retryDelay, a refused feature once without it. A run may make `requests_per_run` requests.
- Files under `state`: usage.json (the ledger: per Pacific day and model, requests, tokens, kinds of
  answer, waste), quota.json (per model: spent or gone until when, its last minute's requests as
  [unix time, tokens]) and models.json (what the API said about each model; see models.py).
A model server of the user's own (Ollama, llama.cpp, LM Studio, vLLM) instead of Gemini, behind the same
door and the same rules but with no quotas and budgets from context lengths: openai_compatible.py.
"""
import copy
import hmac
import json
import math
import os
import random
import re
import secrets
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import requests

from .models import FEATURES, Models
from .settings import KEY_SHAPES, load_json, save_json

# --- settings ---------------------------------------------------------------------------------
CHARS_PER_TOKEN = 3       # budgets are in estimated tokens: characters of all the request's text / 3
MARGIN = 4 / 3            # such estimates undercount code by up to a third: a prompt, a third larger, must fit
FOLD_TOKENS = 500         # room kept in each budget for the answer instruction folded into a prompt
USEFUL_BUDGET = 4_000     # a model whose minute takes a smaller prompt than this is not planned
STEERING_ROOM = 5_000     # tokens a prompt needs besides the person's goal and tasks: the seed's rules and the
                          # log's end (about 2,000), and room for a few files of code
WINDOW = 61.0             # seconds: the sliding window of the per-minute limits, with a second for the time a
                          # request takes to reach the API (booked as it leaves, counted there as it arrives)
TRANSIENT_TRIES = 3       # tries of one model on 500/502/503/504/408 and network errors
MINUTE_WAITS = 2          # per-minute 429s waited out within one request of the seed
BARE_429_WAIT = 60.0      # seconds to wait after a 429 that says neither which limit nor how long
BACKOFF = 2.0             # seconds before the first retry after a server or network error; doubled, ±50 % jitter
MAX_WAIT = 180.0          # seconds one request of the seed may wait inside the gateway in all
LINGER = 10.0             # seconds close_run waits for a request still under way upstream
RETRY_LATER = timedelta(minutes=5)  # when to try again after Gemini stayed overloaded or out of reach
GONE_FOR = timedelta(days=1)        # a model that answered 404 is not asked again before this
TIMEOUT = (10, 300)       # seconds to connect upstream, and to wait for an answer (Gemma 4 31b can take a minute)
TRANSIENT = {408, 500, 502, 503, 504}
TOKEN_FIELDS = {"prompt": "promptTokenCount", "output": "candidatesTokenCount", "thinking": "thoughtsTokenCount"}
FEATURE_NAMES = {"json_mode": r"json mode|response ?mime ?type|response ?schema",
                 "system_instruction": r"developer instruction|system ?instruction"}  # as a 400 names them
LAZY = re.compile(r"^\s*(#|//|/\*|<!--)\s*((\.\.\.|…)\s*[(\[]?\s*"
                  r"(existing|rest|remaining|previous|unchanged|same|other)"
                  r"|[(\[]?(rest of|remaining)\b.*\b(unchanged|as before|the same|omitted))", re.I | re.M)
ANSWER_ONLY = "Answer with only the JSON object, with no Markdown fence and no words before or after it."
BLOCKED = {"spent": "daily quota spent",  # why a model in quota.json may not be asked before its time
           "gone": "not found (404: retired, misspelled or not open to this key)"}
KEY_HELP = "Fix GEMINI_API_KEY in .env (a free key: https://aistudio.google.com/apikey)."


class Reply(Exception):
    """An error for the seed in Gemini's shape, and the problem it means for the run (None: the seed's own)."""

    def __init__(self, status, name, message, problem=None, retry_at=None):
        super().__init__(message)
        self.status, self.name, self.message, self.problem, self.retry_at = status, name, message, problem, retry_at

    def body(self):
        error = {"code": self.status, "status": self.name, "message": self.message}
        if self.retry_at:
            seconds = max(0, math.ceil((self.retry_at - utc_now()).total_seconds()))
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"}]
        return {"error": error}


class Retry(Exception):
    """Ask the same model again: after backoff ("server"), after `delay` ("minute"), or at once ("adapted")."""

    def __init__(self, kind, why, delay=None):
        super().__init__(why)
        self.kind, self.why, self.delay = kind, why, delay


class MovedOn(Exception):
    """This model cannot answer before its reset (its day spent, or gone): the next one may."""


class Run:
    """One seed run: its token, its model and budget, and what its requests did."""

    def __init__(self, model, budget):
        self.token = secrets.token_urlsafe(24)
        self.model, self.budget = model, budget
        self.asked = 0                 # requests of the seed admitted (the cap counts these)
        self.calls, self.refused = [], []
        self.salvaged, self.answered, self.problem = "", False, None
        self.planned = {"tasks": [], "done": []}  # the answer's own word: its tasks, the open tasks it finished
        self.over = threading.Event()  # set by close_run: the token stops working, waits end
        self.busy = threading.Condition()
        self.under_way = 0             # requests of the seed being served now


class Gateway:
    """A loopback server speaking Gemini's REST shape: the only holder of the key.

    Its upstream is Gemini. openai_compatible.OpenAICompatibleGateway is the same door to a server of the user's
    own; it overrides what differs: the class settings below, check_settings, the plan (open_run, budget,
    minute_budget, hindrance), the upstream call (post, unreachable) and the judging of its answer (judge,
    judge_answer).
    """
    local = False             # True: a server of the user's own, no quotas and no pacing (models.LOCAL)
    key_name = "GEMINI_API_KEY"  # the setting holding the key: errors name it, redaction shows it
    model_help = ("Set GEMINI_MODEL in .env to models this key can call (python fallback.py --models lists them); a "
                  "model that answered 404 is asked again after a day, or at once if you delete {quota}")

    def __init__(self, upstream, key, models, state, prompt_tokens=60_000, requests_per_run=1, say=print,
                 limits=None, backoff=BACKOFF, max_wait=MAX_WAIT, linger=LINGER):
        self.check_settings(upstream, key, models)
        self.upstream, self.key, self.models = upstream.rstrip("/"), key, list(dict.fromkeys(models))
        self.usage, self.quota_path = Path(state) / "usage.json", Path(state) / "quota.json"
        limits = os.environ.get("GEMINI_LIMITS", "") if limits is None else limits
        self.known = Models(Path(state) / "models.json", limits, local=self.local)
        self.quota = {model: entry for model, entry in load_json(self.quota_path).items() if isinstance(entry, dict)}
        self.prompt_tokens, self.requests_per_run = prompt_tokens, requests_per_run
        self.backoff, self.max_wait, self.linger = backoff, max_wait, linger
        self.said = say
        self.lock = threading.RLock()
        self.run, self.stopped, self.server, self.url, self.steering = None, None, None, None, 0

    def check_settings(self, upstream, key, models):
        """A ValueError saying which setting to fix, when one cannot work."""
        if not key:
            raise ValueError("GEMINI_API_KEY is not set: copy .env.example to .env and put your key there")
        if not re.match(r"https?://[^/\s]+", upstream):
            raise ValueError(f"GEMINI_API_BASE is not a usable URL: {upstream!r}")
        if not models:
            raise ValueError("GEMINI_MODEL names no model: list one or more, best first, separated by commas")
        for model in models:
            if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", model):
                raise ValueError(f"GEMINI_MODEL: {model!r} is not a model's name (letters, digits, dots, dashes: "
                                 "python fallback.py --models lists them)")

    # --- the keeper's side ----------------------------------------------------------------------
    def start(self):
        """Serve on 127.0.0.1 at a free port, in a daemon thread."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        """Stop serving; a request waiting inside ends at once."""
        with self.lock:
            if self.run:
                self.run.over.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def open_run(self, steering=0):
        """Plan the next seed run: a token, a model and a budget; or until when to wait; or why to stop.
        `steering`: characters of the person's goal and open tasks, which every prompt carries."""
        with self.lock:
            self.steering = steering // CHARS_PER_TOKEN
            if self.stopped:
                return {"stop": self.stopped}
            hindrances = []
            for model in self.models:
                hindrance = self.hindrance(model)
                if not hindrance:
                    return self.start_run(model)
                hindrances.append(hindrance)
            return self.summarise(hindrances)

    def start_run(self, model):
        """A new run on `model`; a run left open before it ends."""
        if self.run:
            self.run.over.set()
        self.run = Run(model, self.budget(model))
        return {"token": self.run.token, "model": model, "budget": self.run.budget}

    def close_run(self, token, linger=None):
        """End a run (its token stops working, its waits end) and report what it did, after waiting up to
        `linger` seconds (default: the gateway's) for a request still under way upstream. The report says
        whether one was (`asking`)."""
        with self.lock:
            run = self.run if self.run and same(token, self.run.token) else Run(None, 0)
            if run is self.run:
                self.run = None
        run.over.set()
        with run.busy:
            asking = run.under_way > 0  # the run ended while the model had its request: a wait on the world
            run.busy.wait_for(lambda: run.under_way == 0, timeout=self.linger if linger is None else linger)
        with self.lock:
            return {**report_of(run), "asking": asking}

    def record_waste(self, model, why):
        """Count an answered request whose change was thrown away, and why, in today's ledger."""
        with self.lock:
            ledger = load_json(self.usage)
            bump(ledger_entry(ledger, pacific_day(), model)["wasted"], self.redact(why))
            save_json(self.usage, ledger)

    # --- which model, and when ------------------------------------------------------------------
    def budget(self, model):
        """The largest prompt the seed may send the model, in estimated tokens (all its text, characters / 3)."""
        return min(self.prompt_tokens, self.minute_budget(model))

    def minute_budget(self, model):
        """The largest prompt that fits the model's input tokens a minute, with a margin and room for the fold."""
        return int((self.known.get(model)["tpm"] - FOLD_TOKENS) / MARGIN)

    def hindrance(self, model, paced=True):
        """Why this model cannot be asked now, as (kind, until when or None, one line), or None if it can."""
        entry, facts, now = self.quota.get(model, {}), self.known.get(model), utc_now()
        until = read_time(entry.get("until"))
        if until and until > now and entry.get("why") in BLOCKED:
            return entry["why"], until, f"{model}: {BLOCKED[entry['why']]}"
        if self.requests_today(model) >= facts["rpd"]:
            return "spent", next_pacific_midnight(), f"{model}: daily quota spent ({facts['rpd']} requests)"
        if self.minute_budget(model) < USEFUL_BUDGET:
            return "small", None, f"{model}: takes only {facts['tpm']:,} input tokens a minute"
        if self.steering and self.budget(model) < self.steering + STEERING_ROOM:
            capped = " (or raise SEED_PROMPT_TOKENS)" if self.budget(model) == self.prompt_tokens else ""
            return "steering", None, (f"{model}: goal.md and the open tasks (~{self.steering:,} tokens) leave no room "
                                      f"for code in its prompt of {self.budget(model):,} tokens: shorten them{capped}")
        wait = self.pace_wait(model, 0) if paced else 0
        if wait > 0:
            return "paced", now + timedelta(seconds=wait), f"{model}: paced to {facts['rpm']} requests a minute"
        return None

    def summarise(self, hindrances):
        """A wait until the first model frees up, or a stop when waiting frees none."""
        waits = [(until, why) for kind, until, why in hindrances if kind in ("spent", "paced")]
        if waits:
            return {"wait_until": min(until for until, _ in waits), "why": "; ".join(why for _, _, why in hindrances)}
        models_to_fix = any(kind != "steering" for kind, _, _ in hindrances)
        return {"stop": f"no usable model: {'; '.join(why for _, _, why in hindrances)}."
                        + (" " + self.model_help.format(quota=self.quota_path) if models_to_fix else "")}

    def choose(self, run, tokens, tried):
        """The model to ask: the run's, else the first in the list not tried, spent or gone, that the prompt fits."""
        with self.lock:
            if self.stopped:
                raise stopping(self.stopped)
            if not tried and tokens > self.budget(run.model):
                raise Reply(400, "INVALID_ARGUMENT", f"the prompt (~{tokens:,} tokens at {CHARS_PER_TOKEN} characters "
                            f"a token) is over this run's budget of {self.budget(run.model):,} for {run.model}")
            for model in dict.fromkeys([run.model, *self.models]):
                if model not in tried and not self.hindrance(model, paced=False) and tokens <= self.budget(model):
                    return model
            hindrances = [self.hindrance(model, paced=False) for model in self.models]
            if None in hindrances:
                raise waiting(utc_now(), f"the prompt (~{tokens:,} tokens) is over the budget of every model left")
            raise refusal(self.summarise(hindrances))

    def requests_today(self, model):
        """Today's requests to the model that may have reached Gemini (an outage must not spend a day)."""
        use = load_json(self.usage).get(pacific_day(), {}).get(model, {})
        return use.get("requests", 0) - use.get("kinds", {}).get("network error", 0)

    def mark(self, model, why, until):
        """Remember that a model cannot be asked before `until`: its day is spent, or it is gone."""
        with self.lock:
            self.quota.setdefault(model, {}).update(until=until.isoformat(), why=why)
            save_json(self.quota_path, self.quota)

    def learn(self, model, **facts):
        """Keep what the API just said about a model; True when it was news."""
        with self.lock:
            news = self.known.learn(model, **facts)
        if news:
            self.say(f"{model}: learned {', '.join(f'{name} = {value}' for name, value in facts.items())}")
        return news

    # --- pacing ---------------------------------------------------------------------------------
    def recent(self, model):
        """The model's requests of the last minute, oldest first, as [unix time, tokens]."""
        now = time.time()
        return sorted(r for r in self.quota.get(model, {}).get("recent", []) if isinstance(r, list) and len(r) == 2
                      and all(isinstance(n, (int, float)) for n in r) and now - r[0] < WINDOW)

    def pace_wait(self, model, weight):
        """Seconds until a request of `weight` tokens keeps the model under its requests and tokens a minute."""
        facts, recent, now = self.known.get(model), self.recent(model), time.time()
        wait = recent[-facts["rpm"]][0] + WINDOW - now if len(recent) >= facts["rpm"] else 0.0
        used = sum(tokens for _, tokens in recent)
        for sent, tokens in recent:  # the oldest leave the window first
            if used + weight <= facts["tpm"]:
                break
            used -= tokens
            wait = max(wait, sent + WINDOW - now)
        return wait

    def pace(self, run, model, weight, deadline):
        """Wait until this request keeps the model under its per-minute limits, then book it in the window."""
        while True:
            with self.lock:
                wait = self.pace_wait(model, weight)
                if wait <= 0:
                    self.quota.setdefault(model, {})["recent"] = self.recent(model) + [[time.time(), weight]]
                    save_json(self.quota_path, self.quota)
                    return
            if not self.pause(run, wait, deadline, f"{model}: pacing under its per-minute limits"):
                raise waiting(utc_now() + timedelta(seconds=wait), f"{model}: paced under its per-minute limits")

    def pause(self, run, seconds, deadline, why):
        """Wait inside the gateway; False when the wait would pass the request's deadline."""
        if seconds <= 0:
            return True
        if time.monotonic() + seconds > deadline:
            return False
        self.say(f"{why}, waiting {seconds:.1f} s")
        if run.over.wait(seconds):
            raise Reply(503, "UNAVAILABLE", "the run ended while its request waited")
        return True

    # --- the seed's side ------------------------------------------------------------------------
    def serve(self, path, token, data):
        """(HTTP status, body) for one request of the seed. Never raises."""
        run = None
        try:
            if not re.fullmatch(r"/v1beta/models/[^?]+:generateContent(\?.*)?", path):  # any name: it is advisory
                raise Reply(404, "NOT_FOUND", "the gateway serves only POST /v1beta/models/{model}:generateContent")
            run = self.admit(token)
            return 200, self.ask(run, read_request(data))
        except Reply as reply:
            return reply.status, self.settle(run, reply)
        except Exception as error:  # a bug of the gateway's must not end the keeper: it becomes this run's problem
            why = f"the gateway failed: {type(error).__name__}: {error}"
            return 500, self.settle(run, Reply(500, "INTERNAL", why, {"kind": "unusable", "why": why}))
        finally:
            if run:
                with run.busy:
                    run.under_way -= 1
                    run.busy.notify_all()

    def admit(self, token):
        """The open run this token belongs to, its request counted against the cap; else Reply 401 or 429."""
        with self.lock:
            run = self.run
            if not run or not same(token, run.token):
                raise Reply(401, "UNAUTHENTICATED", "not this run's token: send the run's token (the seed's "
                                                    "GEMINI_API_KEY) in the x-goog-api-key header")
            if run.asked >= self.requests_per_run:
                raise Reply(429, "RESOURCE_EXHAUSTED", f"request cap reached: a run may make {self.requests_per_run} "
                                                       "request(s)")
            run.asked += 1
            with run.busy:
                run.under_way += 1
            return run

    def ask(self, run, request):
        """The clean answer from the run's model or, when that one turns out spent or gone, the next that fits."""
        tokens, tried = estimate_tokens(request), []
        deadline = time.monotonic() + self.max_wait
        while True:
            model = self.choose(run, tokens, tried)
            tried.append(model)
            try:
                answer = self.ask_model(run, model, request, deadline)
            except MovedOn as why:
                self.say(f"{model}: {why}; moving on")
                continue
            with self.lock:
                run.answered = True
                run.problem = run.problem if (run.problem or {}).get("kind") == "stop" else None
            return answer

    def ask_model(self, run, model, request, deadline):
        """Ask one model until it answers, or fails in a way that asking it again cannot mend."""
        tries = {"server": 0, "minute": 0, "adapted": 0}
        limits = {"server": TRANSIENT_TRIES - 1, "minute": MINUTE_WAITS, "adapted": len(FEATURES)}
        while True:
            try:
                return self.attempt(run, model, request, deadline)
            except Retry as retry:
                tries[retry.kind] += 1
                delay = retry.delay if retry.delay is not None else \
                    self.backoff * 2 ** (tries[retry.kind] - 1) * random.uniform(0.5, 1.5)
                if tries[retry.kind] > limits[retry.kind] or \
                        not self.pause(run, delay, deadline, f"{model}: {retry.why}"):
                    raise give_up(model, retry, delay, tries[retry.kind]) from None

    def attempt(self, run, model, request, deadline):
        """One upstream request: adapted to the model, paced, counted before it is sent, then judged."""
        with self.lock:
            if estimate_tokens(request) > self.budget(model):  # its minute, just learned, is smaller than it was
                raise MovedOn(f"the prompt is over its budget of {self.budget(model):,} tokens now")
            if self.requests_today(model) >= self.known.get(model)["rpd"]:  # a retry must not pass the day
                raise MovedOn("daily quota spent")
            body = adapt(request, self.known.get(model))
        self.pace(run, model, math.ceil(estimate_tokens(body) * MARGIN), deadline)
        call, day = self.count_sent(run, model)
        try:
            response = self.post(model, body)
        except requests.RequestException as error:
            kind, outcome = "network error", self.unreachable(error)
        else:
            kind, outcome = self.judge(run, model, response, call)
        self.count_returned(call, day, kind)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def post(self, model, body):
        """Send the adapted request upstream, the key in its header."""
        return requests.post(f"{self.upstream}/v1beta/models/{quote(model, safe='')}:generateContent", json=body,
                             headers={"x-goog-api-key": self.key}, timeout=TIMEOUT, allow_redirects=False)

    def unreachable(self, error):
        """What to do when the upstream could not be reached: try again after a backoff."""
        return Retry("server", f"cannot reach {self.upstream} ({type(error).__name__}): check the network")

    def judge(self, run, model, response, call):
        """(kind for the ledger, the clean answer or what to do instead) for an upstream response."""
        if response.status_code != 200:
            return self.judge_error(model, *read_error(response))
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return "unusable answer", unusable(f"the API's answer is not a JSON object: {response.text[:80]!r}")
        return self.judge_answer(run, model, body, call)

    def judge_answer(self, run, model, body, call):
        """(kind for the ledger, the clean answer or why it is unusable) for an answer in Gemini's shape."""
        call["tokens"] = read_usage(body)
        try:
            answer, salvaged = clean_answer(body)
        except Reply as reply:
            return "unusable answer", reply
        return "answer", self.keep_answer(run, model, answer, salvaged, body)

    def keep_answer(self, run, model, answer, salvaged, body):
        """The answer for the seed without its lazy files; the run notes them and what was salvaged."""
        answer, refused = drop_lazy(answer)
        with self.lock:
            run.refused += refused
            run.salvaged = salvaged or run.salvaged
            run.planned = {"tasks": answer["tasks"][:10], "done": answer["done"][:50]}
        return answer_body(answer, body, model)

    def judge_error(self, model, code, status, message, details):
        """(kind for the ledger, what to do: Retry, MovedOn or a Reply) for an error answer."""
        said, (scope, figure) = f"{code} {status}: {one_line(message)}", read_quota(message, details)
        if code == 429 and "credits are depleted" in message:
            return "429 credits depleted", stopping(f"Gemini says the prepayment credits of this key's project are used"
                                                    f" up ({said}): add credits, or use a key of a free-tier project")
        if code == 429 and (scope == "rpd" or re.search(r"limit: 0\b", message)):
            self.mark(model, "spent", next_pacific_midnight())
            if figure:
                self.learn(model, rpd=figure)
            return "429 per day", MovedOn("daily quota spent")
        if code == 429:
            return self.judge_minute(model, scope, figure, retry_delay(message, details))
        if code in TRANSIENT:
            return f"server error {code}", Retry("server", f"answered {said}")
        if code == 404:
            self.mark(model, "gone", utc_now() + GONE_FOR)
            return "model not found", MovedOn(f"answered {said}")
        if status == "FAILED_PRECONDITION":
            return "free tier unavailable", stopping(f"Gemini's free tier is not available here ({said}). See "
                                                     "https://ai.google.dev/gemini-api/docs/available-regions")
        if code in (401, 403) or "API_KEY_INVALID" in json.dumps(details):
            return "key refused", stopping(key_refusal(code, status, message, details))
        feature = refused_feature(message)
        if code == 400 and feature and self.learn(model, **{feature: False}):
            return "feature refused", Retry("adapted", f"refused {feature}, asking again without it", 0)
        kind = f"bad request {code}" if 400 <= code < 500 else f"unexpected {code}"
        return kind, unusable(f"Gemini refused the request ({said})", code if 400 <= code < 500 else 502, status)

    def judge_minute(self, model, scope, figure, delay):
        """A per-minute 429: learn its figure, then wait its retryDelay (+ a little), or 60 s when it names none."""
        if scope in ("rpm", "tpm") and figure:
            self.learn(model, **{scope: figure})
        wait = BARE_429_WAIT if delay is None else delay + min(1.0, delay / 10)
        kind = "429 per minute" if scope else "429 without details"
        return kind, Retry("minute", f"per-minute limit ({kind})", wait)

    def count_sent(self, run, model):
        """Book an upstream request in the run and the ledger before it is sent: one cut short still counts."""
        call, day = {"model": model, "kind": "no answer", "tokens": dict.fromkeys(TOKEN_FIELDS, 0)}, pacific_day()
        with self.lock:
            run.calls.append(call)
            ledger = load_json(self.usage)
            ledger_entry(ledger, day, model)["requests"] += 1
            save_json(self.usage, ledger)
        return call, day

    def count_returned(self, call, day, kind):
        """Book what an upstream request came back as: its kind, its tokens, and as waste unless an answer."""
        with self.lock:
            call["kind"] = kind
            ledger = load_json(self.usage)
            use = ledger_entry(ledger, day, call["model"])
            for name, count in call["tokens"].items():
                use[name] += count
            bump(use["kinds"], kind)
            if kind != "answer":
                bump(use["wasted"], kind)
            save_json(self.usage, ledger)

    def settle(self, run, reply):
        """The error body for the seed, redacted; its problem becomes the run's (a stop is never replaced)."""
        reply.message = self.redact(reply.message)
        if reply.problem:
            reply.problem["why"] = self.redact(reply.problem["why"])
            self.say(f"gateway: {reply.problem['kind']}: {reply.problem['why']}")
        with self.lock:
            if reply.problem and reply.problem["kind"] == "stop":
                self.stopped = reply.problem["why"]
            if run and reply.problem and (run.problem or {}).get("kind") != "stop":
                run.problem = reply.problem
        return reply.body()

    def redact(self, text):
        """The text without the key, or anything shaped like a Google API key."""
        text = str(text).replace(self.key, f"[{self.key_name}]") if len(self.key) >= 8 else str(text)
        return KEY_SHAPES.sub("[GEMINI_API_KEY]", text)

    def say(self, line):
        self.said(self.redact(line))


def handler_for(gateway):
    """The HTTP side: each POST goes to gateway.serve; nothing is logged (the gateway says what matters)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = self.headers.get("Content-Length", "0")
            data = self.rfile.read(int(length)) if length.isdigit() else b""
            self.send(*gateway.serve(self.path, self.headers.get("x-goog-api-key", ""), data))

        def do_GET(self):
            self.send(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "the gateway serves only "
                                      "POST /v1beta/models/{model}:generateContent"}})

        def send(self, status, body):
            data = json.dumps(body, ensure_ascii=False).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the seed hung up; its request is in the ledger all the same
                pass

        def log_message(self, *args):
            pass

    return Handler


# --- the request ----------------------------------------------------------------------------------
def read_request(data):
    """The seed's generateContent body, or a Reply 400 saying what it must look like."""
    try:
        request = json.loads(data)
    except ValueError:
        request = None
    system, config = (request.get(name) if isinstance(request, dict) else None
                      for name in ("systemInstruction", "generationConfig"))
    if not isinstance(request, dict) or not isinstance(request.get("contents"), list) or not request["contents"] \
            or not all(map(is_content, request["contents"])) or (system is not None and not is_content(system)) \
            or not isinstance(config or {}, dict):
        raise Reply(400, "INVALID_ARGUMENT", 'not a generateContent request: {"systemInstruction": {"parts": [...]}, '
                                             '"contents": [{"role": "user", "parts": [{"text": "..."}]}], '
                                             '"generationConfig": {...}}')
    return request


def is_content(value):
    return isinstance(value, dict) and isinstance(value.get("parts"), list) and \
        all(isinstance(part, dict) for part in value["parts"])


def estimate_tokens(body):
    """Characters of all the text in a request, over CHARS_PER_TOKEN."""
    contents = body["contents"] + [body.get("systemInstruction") or {"parts": []}]
    texts = [part.get("text") for content in contents for part in content["parts"]]
    return sum(len(text) for text in texts if isinstance(text, str)) // CHARS_PER_TOKEN


def adapt(request, facts):
    """The body for a model: what it accepts, the rest folded into the text; never a thinking setting."""
    body = {"contents": copy.deepcopy(request["contents"])}
    config = dict(request.get("generationConfig") or {})
    config.pop("thinkingConfig", None)
    if not facts["json_mode"] and config.get("responseMimeType") == "application/json":
        taken = {name: config.pop(name, None) for name in ("responseMimeType", "responseSchema", "responseJsonSchema")}
        schema = taken["responseSchema"] or taken["responseJsonSchema"]
        fold(body["contents"][-1], ANSWER_ONLY + (f" It follows this schema: {json.dumps(schema)}" if schema else ""),
             first=False)
    system = request.get("systemInstruction")
    texts = [part["text"] for part in (system or {}).get("parts", []) if isinstance(part.get("text"), str)]
    if system and not facts["system_instruction"]:
        fold(body["contents"][0], "\n\n".join(texts), first=True)
    elif system:
        body["systemInstruction"] = system
    if config:
        body["generationConfig"] = config
    return body


def fold(content, text, first):
    """Put text before the first text part of a content, or after its last one."""
    parts = [part for part in content["parts"] if isinstance(part.get("text"), str)]
    if not parts:
        content["parts"].insert(0 if first else len(content["parts"]), {"text": text})
    elif first:
        parts[0]["text"] = f"{text}\n\n{parts[0]['text']}"
    else:
        parts[-1]["text"] = f"{parts[-1]['text']}\n\n{text}"


# --- the answer -----------------------------------------------------------------------------------
def clean_answer(body):
    """(the answer, a line on what was salvaged or ""), or a Reply saying why the answer is unusable."""
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        raise unusable(f"prompt blocked ({feedback['blockReason']})")
    candidates = body.get("candidates")
    candidate = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
    text, finish = answer_text(candidate), candidate.get("finishReason")
    if finish == "STOP" and (answer := find_answer(text)):
        return answer, ""
    if finish == "MAX_TOKENS" and (answer := salvage(text)):
        return answer, f"cut off (MAX_TOKENS): kept the {len(answer['files'])} file(s) that came whole"
    raise unusable(f"answer cut off, empty or not the JSON asked for (finishReason {finish}, {len(text):,} "
                   f"characters: {text[:80]!r})")


def answer_text(candidate):
    """The candidate's text, without thought parts."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(part["text"] for part in parts if isinstance(part, dict) and not part.get("thought")
                   and isinstance(part.get("text"), str)) if isinstance(parts, list) else ""


def find_answer(text):
    """The answer object wherever it starts in the text: behind a Markdown fence, a space or prose."""
    decoder = json.JSONDecoder()
    for start in re.finditer(r'\{\s*"(?:tasks|done|files)"', text):
        try:
            value, _ = decoder.raw_decode(text, start.start())
        except ValueError:
            continue
        if answer := as_answer(value):
            return answer
    return None


def as_answer(value):
    """The answer in the schema asked for (tasks as text, done as numbers, files with a path and a text), or None."""
    if not isinstance(value, dict) or not isinstance(value.get("tasks"), list) \
            or not isinstance(value.get("files"), list):
        return None
    if not all(isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)
               for item in value["files"]):
        return None
    done = value.get("done") if isinstance(value.get("done"), list) else []
    return {"tasks": [str(task) for task in value["tasks"]],
            "done": [n for n in done if isinstance(n, int) and not isinstance(n, bool)],
            "files": [{"path": item["path"], "content": item["content"]} for item in value["files"]]}


def salvage(text):
    """The tasks and the whole files at the start of an answer cut off, or None when no file came whole."""
    decoder, found = json.JSONDecoder(), {"tasks": [], "files": []}
    for name in found:
        match = re.search(rf'"{name}"\s*:\s*\[', text)
        position = match.end() if match else len(text)
        while position < len(text):
            position = re.compile(r"[\s,]*").match(text, position).end()
            try:
                item, position = decoder.raw_decode(text, position)
            except ValueError:
                break
            found[name].append(item)
    found["files"] = [item for item in found["files"] if isinstance(item, dict)
                      and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)]
    return as_answer(found) if found["files"] else None


def drop_lazy(answer):
    """The answer without files whose text stands in for code, and a line for each file dropped."""
    kept, refused = [], []
    for item in answer["files"]:
        if not item["content"].strip():
            refused.append(f"{item['path']}: empty")
        elif LAZY.search(item["content"]):
            refused.append(f"{item['path']}: lazy: its text stands in for code it would drop")
        else:
            kept.append(item)
    return {**answer, "files": kept}, refused


def answer_body(answer, body, model):
    """The clean answer in Gemini's shape: one text part holding the JSON object alone."""
    usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else {}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": json.dumps(answer, ensure_ascii=False)}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": body.get("modelVersion") or model}


def read_usage(body):
    """{"prompt", "output", "thinking"} tokens of an answer; a field missing or odd counts 0."""
    usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else {}
    return {name: usage[field] if isinstance(usage.get(field), int) and usage[field] >= 0 else 0
            for name, field in TOKEN_FIELDS.items()}


# --- errors ---------------------------------------------------------------------------------------
def read_error(response):
    """(code, status, message, details) of an error answer, whatever its body."""
    try:
        error = response.json()["error"]
        details = error.get("details") if isinstance(error.get("details"), list) else []
        return int(error.get("code", response.status_code)), str(error.get("status", "")), \
            str(error.get("message", "")), [detail for detail in details if isinstance(detail, dict)]
    except (ValueError, KeyError, TypeError, AttributeError):
        return response.status_code, "", response.text[:200], []


def read_quota(message, details):
    """The limit a 429 names, ("rpm" | "tpm" | "rpd" | None, its figure or None): QuotaFailure, else the message."""
    limit = re.search(r"limit: (\d+)", message)
    stated = int(limit.group(1)) if limit else None
    for violation in (v for detail in details for v in detail.get("violations") or [] if isinstance(v, dict)):
        quota_id, value = str(violation.get("quotaId", "")), str(violation.get("quotaValue", ""))
        scope = "rpd" if "PerDay" in quota_id else "tpm" if "Token" in quota_id else \
            "rpm" if "PerMinute" in quota_id else None
        if scope:
            return scope, int(value) if value.isdigit() and int(value) > 0 else stated or None
    return ("tpm", stated or None) if "input_token_count" in message else (None, None)


def retry_delay(message, details):
    """Seconds a 429 asks to wait: its RetryInfo, else "Please retry in N s" in its message, else None."""
    for text in [str(detail.get("retryDelay", "")) for detail in details] + [message]:
        match = re.search(r"(?:^|retry in )(\d+(?:\.\d+)?)s", text)
        if match:
            return float(match.group(1))
    return None


def refused_feature(message):
    """The feature a 400 says the model refuses ("... is not enabled for models/X"), or None."""
    if re.search(r"not (enabled|supported)", message, re.I):
        for feature, names in FEATURE_NAMES.items():
            if re.search(names, message, re.I):
                return feature
    return None


def key_refusal(code, status, message, details):
    """One line on a refused key, saying what to do."""
    reasons = [str(detail.get("reason")) for detail in details if detail.get("reason")]
    if "ACCESS_TOKEN_TYPE_UNSUPPORTED" in reasons or "Expected OAuth 2 access token" in message:
        return ("Gemini refused this key (401 ACCESS_TOKEN_TYPE_UNSUPPORTED); its \"Expected OAuth 2 access token\" "
                "is misleading: the key itself was not accepted (revoked, mistyped, or not a Gemini API key). "
                + KEY_HELP)
    reason = f", {reasons[0]}" if reasons else ""
    return f"Gemini refused this key ({code} {status}{reason}): {one_line(message)} {KEY_HELP}"


def give_up(model, retry, delay, tries):
    """The Reply once retrying stops: Gemini overloaded or out of reach (try in a while), or a minute to wait out."""
    if retry.kind == "server":
        return waiting(utc_now() + RETRY_LATER, f"{model} {retry.why} ({tries} tries)", 503)
    return waiting(utc_now() + timedelta(seconds=delay), f"{model}: {retry.why}")


def waiting(until, why, status=429):
    return Reply(status, "RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE", why,
                 {"kind": "wait", "until": until, "why": why}, until)


def stopping(why):
    return Reply(403, "PERMISSION_DENIED", why, {"kind": "stop", "why": why})


def unusable(why, status=502, name="INTERNAL"):
    return Reply(status, name or "INTERNAL", why, {"kind": "unusable", "why": why})


def refusal(summary):
    """A plan that says wait or stop, as a Reply for the seed."""
    return stopping(summary["stop"]) if "stop" in summary else waiting(summary["wait_until"], summary["why"])


# --- small things ---------------------------------------------------------------------------------
def report_of(run):
    """What close_run hands the keeper."""
    calls = copy.deepcopy(run.calls)
    return {"model": calls[-1]["model"] if calls else None, "requests": len(calls), "calls": calls,
            "tokens": {name: sum(call["tokens"][name] for call in calls) for name in TOKEN_FIELDS},
            "refused": list(run.refused), "salvaged": run.salvaged, "answered": run.answered,
            "problem": copy.copy(run.problem), "planned": copy.deepcopy(run.planned)}


def ledger_entry(ledger, day, model):
    """The ledger's counts for a model on a Pacific day, made if missing."""
    use = ledger.setdefault(day, {}).setdefault(model, {})
    for name in ("requests", *TOKEN_FIELDS):
        use.setdefault(name, 0)
    use.setdefault("kinds", {})
    use.setdefault("wasted", {})
    return use


def bump(counts, name):
    counts[name] = counts.get(name, 0) + 1


def same(token, expected):
    return hmac.compare_digest(token.encode(), expected.encode())


def one_line(text):
    return " ".join(str(text).split())


def utc_now():
    return datetime.now(timezone.utc)


def read_time(text):
    try:
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo else None
    except (TypeError, ValueError):
        return None


def pacific():
    """Free-tier days run from midnight to midnight Pacific time."""
    try:
        return ZoneInfo("America/Los_Angeles")
    except ZoneInfoNotFoundError:  # no time zone database: assume PST, which is never early
        return timezone(timedelta(hours=-8))


def pacific_day():
    return datetime.now(pacific()).date().isoformat()


def next_pacific_midnight():
    """When the daily quotas reset (daylight saving included)."""
    tomorrow = datetime.now(pacific()).date() + timedelta(days=1)
    return datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=pacific()).astimezone(timezone.utc)
