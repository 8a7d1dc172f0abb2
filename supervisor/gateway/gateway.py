"""gateway: the only door to the model. Through its backend it holds the key; it decides what may be asked, of
whom, and when.

    gw = Gateway(backend, state=Path("backups"))   # backend: gemini.py's or openai_compatible.py's (backends.py)
    gw.start()                                     # a loopback server at gw.url (door.py)
    plan = gw.open_run(steering)        # an outcomes.Plan: a run (token, model, budget), a wait or a stop
    ...                                 # the seed runs with GEMINI_API_BASE=gw.url, GEMINI_API_KEY=plan.token
    gw.waited(plan.token)               # seconds the gateway itself waited during the run (its limit grows by them)
    report = gw.close_run(plan.token)   # an outcomes.Report: what the run asked, spent, got, refused; any problem;
                                        # each call's bytes as the seed asked, as sent upstream, received, cleaned
    gw.close()
The seed POSTs /v1beta/models/{any}:generateContent (or /v1/...) with its run's token, checked before its body
is read; answers.py reads the request, adapts it to the wire (never adding content nor choosing sampling: what
the model is told is the seed's), and cleans the answer. No wire format is known here: the backend turns
the request into its server's and the answer or error into an outcomes.Kind, which the gateway acts on. Rules:
- A request that cannot succeed is never sent: not to a model whose day is spent (until midnight Pacific) or
  that was not found (for a day), not over the model's budget, not with a feature the model refuses.
- A model is planned only when its budget holds the person's steering (goal.md and the open tasks) and room
  for code, and its minute (a sliding window, kept across restarts) has room for a whole prompt: the seed's
  time limit never pays for pacing, and grows by any wait of a retry (`waited`).
- What can succeed is retried: a server busy or out of reach with backoff, a per-minute limit after its delay,
  a refused feature once without it; every wait is said on the console. A run may make `requests_per_run`.
Its files under `state`: record.sqlite (each request booked there as it leaves: record.Sent), quota.json
(ledger.py), models.json (models.py).
"""
import copy
import hmac
import json
import math
import random
import re
import secrets
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from . import answers, door, outcomes
from .. import names, scrub
from ..kinds import TOKEN_FIELDS
from .answers import CHARS_PER_TOKEN, MARGIN
from ..store.ledger import Books, next_pacific_midnight, utc_now
from ..store.record import Sent
from .models import FEATURES, Models
from .outcomes import Kind, MovedOn, Plan, Reply, Report, Retry, Trouble, refusal, stopping, unusable, waiting
from ..settings import NAMED

# --- settings ---------------------------------------------------------------------------------
STEERING_ROOM = 2_000     # tokens a prompt needs besides the person's goal and tasks: the seed's rules (about
                          # 400) and the log's end (about 1,300), and room for a small file: a context of 8,192
                          # tokens leaves 3,311 for the prompt
TRANSIENT_TRIES = 3       # tries of one model when its server is busy or out of reach
MINUTE_WAITS = 2          # per-minute limits waited out within one request of the seed
BACKOFF = 2.0             # seconds before the first retry after a server or network error; doubled, ±50 % jitter
MAX_WAIT = 180.0          # seconds one request of the seed may wait inside the gateway in all
STREAK = 5                # answers in a row of one model that landed nothing, after which the console says why
LINGER = 10.0             # seconds close_run waits for a request still under way upstream
RETRY_LATER = timedelta(minutes=5)  # when to try again after the server stayed busy or out of reach
GONE_FOR = timedelta(days=1)        # a model that was not found is not asked again before this


class Run:
    """One seed run: its token, its model and budget, and what its requests did."""

    def __init__(self, model, budget):
        self.token = secrets.token_urlsafe(24)
        self.model, self.budget = model, budget
        self.asked, self.waited = 0, 0.0  # requests admitted (the cap counts these); seconds the gateway waited
        self.calls, self.refused = [], []
        self.salvaged, self.answered, self.problem = "", False, None
        self.planned = {"tasks": [], "done": []}  # the answer's own word: its tasks, the open tasks it finished
        self.over = threading.Event()  # set by close_run: the token stops working, waits end
        self.busy = threading.Condition()
        self.under_way = 0             # requests of the seed being served now


class Gateway:
    """A loopback server speaking Gemini's REST shape to the seed, and its backend's format upstream."""

    def __init__(self, backend, state, prompt_tokens=60_000, requests_per_run=1, say=print, tell=None,
                 limits=None, backoff=BACKOFF, max_wait=MAX_WAIT, linger=LINGER):
        self.backend, self.models = backend, list(dict.fromkeys(backend.models))
        limits = backend.limits if limits is None else limits  # GEMINI_LIMITS, for the backend with quotas
        self.books, self.known = Books(state), Models(Path(state) / "models.json", limits, local=backend.local)
        self.sent = Sent(state)
        self.prompt_tokens, self.requests_per_run = prompt_tokens, requests_per_run
        self.backoff, self.max_wait, self.linger = backoff, max_wait, linger
        self.said, self.told = say, tell or say  # the status line; the console's permanent lines (waits)
        self.lock = threading.RLock()
        self.run, self.stopped, self.server, self.url, self.steering = None, None, None, None, 0
        self.closed = None  # the run closed last: closing it again gives its account again, as it is now
        self.wasted = {}  # model -> why each of its answers in a row landed nothing

    # --- the keeper's side ----------------------------------------------------------------------
    def start(self):
        """Serve on 127.0.0.1 at a free port, in daemon threads."""
        self.server = door.serve(self)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        """Stop serving; a request waiting inside ends at once."""
        with self.lock:
            if self.run:
                self.run.over.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
        with self.lock:
            self.sent.close()

    def open_run(self, steering=0):
        """Plan the next seed run: a token, a model and a budget; or until when to wait; or why to stop.
        `steering`: characters of the person's goal and open tasks, which every prompt carries."""
        plan = None if self.stopped else self.backend.prepare(self.models)  # what the server must say first
        with self.lock:
            self.steering = steering // CHARS_PER_TOKEN
            if self.stopped or plan:
                return Plan(stop=self.stopped) if self.stopped else plan
            hindrances = [self.hindrance(model) for model in self.models]
            if None in hindrances:
                return self.start_run(self.models[hindrances.index(None)])
            return self.summarise(hindrances)

    def start_run(self, model):
        """A new run on `model`; a run left open before it ends."""
        if self.run:
            self.run.over.set()
        self.run = Run(model, self.budget(model))
        return Plan(token=self.run.token, model=model, budget=self.run.budget)

    def waited(self, token):
        """Seconds the gateway itself waited (pacing, retries) during the run of this token."""
        with self.lock:
            return self.run.waited if self.run and same(token, self.run.token) else 0.0

    def close_run(self, token, linger=None):
        """End a run (its token stops working, its waits end) and report what it did, after waiting up to
        `linger` seconds (default: the gateway's) for a request still under way upstream. The report says
        whether one was (`asking`). The run closed last, closed again (Ctrl+C as the gate judged its answer), gives
        its account again: its requests are never lost to the record."""
        with self.lock:
            if self.run and same(token, self.run.token):
                run, self.run, self.closed = self.run, None, self.run
            else:
                run = self.closed if self.closed and same(token, self.closed.token) else Run(None, 0)
        run.over.set()
        with run.busy:
            asking = run.under_way > 0  # the run ended while the model had its request: a wait on the world
            run.busy.wait_for(lambda: run.under_way == 0, timeout=self.linger if linger is None else linger)
        with self.lock:
            return report_of(run, asking)

    def tally(self, model, wasted_on):
        """Keep what each answer of a model came to (None: it landed; else the kind of what it failed on): after STREAK
        in a row that landed nothing, a line on the console saying what they came to (returned too); else None."""
        with self.lock:
            if wasted_on is None:
                self.wasted.pop(model, None)
                return None
            wasted = self.wasted.setdefault(model, [])
            wasted.append(wasted_on)
            if len(wasted) % STREAK:
                return None
            kinds = ", ".join(f"{n} {kind}" for kind, n in Counter(wasted).most_common())
        self.tell(line := f"{model}: the last {len(wasted)} answers landed nothing ({kinds}); if this goes on, this "
                          "model may be too small for whole-file answers: try a larger one")
        return line

    # --- which model, and when ------------------------------------------------------------------
    def budget(self, model):
        """The largest prompt the seed may send the model, in estimated tokens, under the user's cap."""
        return min(self.prompt_tokens, self.backend.room(model, self.known.get(model)))

    def hindrance(self, model, paced=True):
        """Why this model cannot be asked now, as (kind, until when or None, one line), or None if it can."""
        if blocked := self.books.blocked(model):
            return blocked
        facts = self.known.get(model)
        if self.sent.today(model) >= facts["rpd"]:
            return "spent", next_pacific_midnight(), f"{model}: daily quota spent ({facts['rpd']} requests)"
        if small := self.backend.hindrance(model, facts):
            return "small", None, small
        budget, need = self.budget(model), self.steering + STEERING_ROOM
        if self.steering and budget < need:
            fix = "shorten them (or raise SEED_PROMPT_TOKENS)" if budget == self.prompt_tokens else \
                self.backend.make_room(model, need)
            return "steering", None, (f"{model}: goal.md and the open tasks (~{self.steering:,} tokens), with the "
                                      f"seed's rules, the log's end and a little code (~{STEERING_ROOM:,}), are "
                                      f"~{need - budget:,} tokens over its prompt of {budget:,}: {fix}")
        # the whole budget must fit the window now: the seed's time limit never pays for the gateway's pacing
        wait = self.books.pace_wait(model, math.ceil(budget * MARGIN), facts) if paced else 0
        if wait > 0:
            return "paced", utc_now() + timedelta(seconds=wait), (f"{model}: paced to {facts['rpm']} requests and "
                                                            f"{facts['tpm']:,} input tokens a minute")
        return None

    def summarise(self, hindrances):
        """A wait until the first model frees up, or a stop when waiting frees none."""
        waits = [(until, why) for kind, until, why in hindrances if kind in ("spent", "paced")]
        if waits:
            return Plan(wait_until=min(until for until, _ in waits), why="; ".join(why for _, _, why in hindrances))
        models_to_fix = any(kind != "steering" for kind, _, _ in hindrances)
        return Plan(stop=f"no usable model: {'; '.join(why for _, _, why in hindrances)}."
                    + (" " + self.model_help() if models_to_fix else ""),
                    steering=not models_to_fix)  # only the person's goal and tasks keep them out

    def model_help(self):
        """How to name models that can be asked: with --model when this run's came from it, not from .env."""
        helped = self.backend.model_help.format(quota=self.books.quota_path)
        return re.sub(r"^Set \w+ in \.env to", "Give --model", helped) if NAMED.get("--model") else helped

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

    def mark(self, model, why, until):
        with self.lock:
            self.books.mark(model, why, until)

    def learn(self, model, **facts):
        """Keep what the server just said about a model; True when it was news."""
        with self.lock:
            news = self.known.learn(model, **facts)
        if news:
            self.say(f"{model}: learned {', '.join(f'{name} = {value}' for name, value in facts.items())}")
        return news

    # --- pacing -------------------------------------------------------------------------------------
    def pace(self, run, model, weight, deadline):
        """Wait until this request keeps the model under its per-minute limits, then book it in the window."""
        while True:
            with self.lock:
                wait = self.books.pace_wait(model, weight, self.known.get(model))
                if wait <= 0:
                    return self.books.book(model, weight)
            if not self.pause(run, wait, deadline, f"{model}: pacing under its per-minute limits"):
                raise waiting(utc_now() + timedelta(seconds=wait), f"{model}: paced under its per-minute limits")

    def pause(self, run, seconds, deadline, why):
        """Wait inside the gateway, saying why; False when the wait would pass the request's deadline."""
        if seconds <= 0:
            return True
        if time.monotonic() + seconds > deadline:
            return False
        self.tell(f"gateway: {why}; waiting {seconds:.1f} s")
        with self.lock:
            run.waited += seconds  # before the wait: the run's time limit grows while it lasts
        if run.over.wait(seconds):
            raise Reply(503, "UNAVAILABLE", "the run ended while its request waited")
        return True

    # --- the seed's side ------------------------------------------------------------------------
    def serve(self, path, token, read_body):
        """(HTTP status, body) for one request of the seed: the path and token first, then its body. Never raises."""
        run = None
        try:
            if not re.fullmatch(r"/v1(beta)?/models/[^?/]+:generateContent(\?.*)?", path):  # any name: advisory
                raise Reply(404, "NOT_FOUND", "the gateway serves only POST /v1beta/models/{model}:generateContent")
            run = self.admit(token)
            try:
                request = answers.read_request(refuse_secrets(read_body()))
            except ValueError as error:
                raise Reply(400, "INVALID_ARGUMENT", str(error)) from None
            return 200, self.ask(run, request)
        except Reply as reply:
            return reply.status, self.settle(run, reply)
        except Exception as error:  # a bug of the gateway's must not end the keeper: it becomes this run's problem
            why = f"the gateway failed: {type(error).__name__}: {error}"
            return 500, self.settle(run, unusable(why, 500))
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
        tokens, tried = answers.estimate_tokens(request), []
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
                run.problem = run.problem if run.problem and run.problem.kind is Trouble.STOP else None
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
                    raise (waiting(utc_now() + RETRY_LATER, f"{model} {retry.why} ({tries[retry.kind]} tries)", 503)
                           if retry.kind == "server" else waiting(utc_now() + timedelta(seconds=delay),
                                                                  f"{model}: {retry.why}")) from None

    def attempt(self, run, model, request, deadline):
        """One upstream request: adapted to the model, paced, counted before it is sent, then acted on."""
        with self.lock:
            if answers.estimate_tokens(request) > self.budget(model):  # a limit just learned is smaller than it was
                raise MovedOn(f"the prompt is over its budget of {self.budget(model):,} tokens now")
            if self.sent.today(model) >= self.known.get(model)["rpd"]:  # a retry must not pass the day
                raise MovedOn("daily quota spent")
            body = answers.adapt(request, facts := self.known.get(model), self.backend.answer_format)
        self.pace(run, model, math.ceil(answers.estimate_tokens(body) * MARGIN), deadline)
        with self.lock:
            if run.over.is_set():  # its run ended while it waited or moved on: nothing is sent for it
                raise Reply(503, "UNAVAILABLE", "the run ended before its request was sent")
            try:
                call = self.sent.leave(model)
            except sqlite3.Error as error:  # what cannot be counted is not sent
                raise unusable(f"the request was not sent: backups/record.sqlite cannot be written ({error}; a "
                               "sqlite3 shell holding a write on it?)", 503, "UNAVAILABLE") from None
            run.calls.append(call)
        began, outcomes.TAPE.exchanges, outcomes.TAPE.over = time.monotonic(), [], run.over
        try:
            outcome = self.backend.ask(model, body, facts)
        finally:
            taped, outcomes.TAPE.exchanges, outcomes.TAPE.over = outcomes.TAPE.exchanges, None, None
        outcome.body, outcome.why = scrub.valid(outcome.body), scrub.valid(outcome.why)  # where an answer enters
        sent, received = taped[-1] if taped else (b"", b"")
        call.update(latency=round(time.monotonic() - began, 3), sent=self.redact(sent),
                    received=self.redact(received),
                    asked=self.redact(json.dumps(request, ensure_ascii=False).encode()))  # as the seed asked
        if outcome.body is not None:
            call["tokens"] = answers.read_usage(outcome.body)
        action = self.act(run, model, outcome, body)
        if isinstance(action, dict):  # the answer as the door sends it to the seed
            call["cleaned"] = json.dumps(action, ensure_ascii=False).encode()
        with self.lock:
            self.sent.back(call, "unusable answer" if outcome.kind == Kind.ANSWER and isinstance(action, Reply)
                           else outcome.label)
        if isinstance(action, Exception):
            raise action
        return action

    def act(self, run, model, outcome, sent):
        """The clean answer for the seed, or what to do instead (Retry, MovedOn, a Reply), for an outcome of the
        request `sent`."""
        kind, why = outcome.kind, outcome.why
        if outcome.learned:  # figures the server stated: a 429's quota
            self.learn(model, **outcome.learned)
        if kind == Kind.ANSWER:
            return self.keep_answer(run, model, outcome.body, sent)
        if kind == Kind.RETRY_LATER:
            return Retry("server" if outcome.delay is None else "minute", why, outcome.delay)
        if kind == Kind.REFUSED_FEATURE and self.learn(model, **{outcome.feature: False}):
            return Retry("adapted", f"refused {outcome.feature}, asking again without it", 0)
        if kind == Kind.QUOTA_SPENT:
            self.mark(model, "spent", next_pacific_midnight())
            return MovedOn("daily quota spent")
        if kind == Kind.MODEL_NOT_FOUND and not self.backend.local:
            self.mark(model, "gone", utc_now() + GONE_FOR)
            return MovedOn(why)
        if kind == Kind.CONTEXT_TOO_SMALL and outcome.replan:
            return waiting(utc_now(), why)
        if kind in (Kind.MODEL_NOT_FOUND, Kind.KEY_REFUSED, Kind.CONTEXT_TOO_SMALL):
            return stopping(why)
        return unusable(why, outcome.status, "INVALID_ARGUMENT" if 400 <= outcome.status < 500 else "INTERNAL")

    def keep_answer(self, run, model, body, sent):
        """The answer for the seed, clean and without the files that cannot be the model's work or never land (a name
        off the allow-list: names.py); the run notes them and what was salvaged. An answer left with no file is
        unusable, saying what it held."""
        try:
            answer, salvaged = answers.clean_answer(body, sent)
        except ValueError as why:
            return unusable(str(why))
        answer = scrub.valid(answer)  # its JSON's escapes decoded (a lone "\ud800"): storable too
        answer, refused = answers.drop_unusable(answer, sent)
        named = [(item, names.refusal(item["path"])) for item in answer["files"]]  # a name off the list, taken from a
        answer["files"], refused = [item for item, why in named if not why], refused + [why for _, why in named if why]
        # run, spoils the whole of it: left out here, the rest of the answer can land
        if not answer["files"]:
            return unusable(f"no file to write: the answer held {answers.describe_answer(answer, refused)}")
        with self.lock:
            run.refused += refused
            run.salvaged = salvaged or run.salvaged
            run.planned = {"tasks": answer["tasks"][:10], "done": answer["done"][:50]}
        return answers.answer_body(answer, body, model)

    def settle(self, run, reply):
        """The error body for the seed, redacted; its problem becomes the run's (a stop is never replaced)."""
        reply.message = self.redact(reply.message)
        if reply.problem:
            reply.problem = replace(reply.problem, why=self.redact(reply.problem.why))
            self.say(f"gateway: {reply.problem.kind.value}: {reply.problem.why}")
        with self.lock:
            if reply.problem and reply.problem.kind is Trouble.STOP:
                self.stopped = reply.problem.why
            if run and reply.problem and not (run.problem and run.problem.kind is Trouble.STOP):
                run.problem = reply.problem
        return reply.body()

    def redact(self, data):
        """The text or bytes without any secret (scrub.redact), the key it holds among them (a server may echo it)."""
        return scrub.redact(data, [(self.backend.key_name, self.backend.key)])

    def say(self, line):
        self.said(self.redact(line))

    def tell(self, line):  # a permanent line: waits are said in every mode of the console
        self.told(self.redact(line))


def report_of(run, asking):
    """What close_run hands the keeper: the run's Report, each call a copy as it is now."""
    calls = copy.deepcopy(run.calls)
    return Report(model=calls[-1]["model"] if calls else None, requests=len(calls), calls=tuple(calls),
                  tokens={name: sum(call["tokens"][name] for call in calls) for name in TOKEN_FIELDS},
                  refused=tuple(run.refused), salvaged=run.salvaged, answered=run.answered, problem=run.problem,
                  tasks=tuple(run.planned["tasks"]), done=tuple(run.planned["done"]), asking=asking)


def same(token, expected):
    return hmac.compare_digest(token.encode(), expected.encode())


def refuse_secrets(body):
    """The request's body, if no secret is in it in any form; else a stop (nothing is sent) naming the secret."""
    found = scrub.secret_in(body)
    if found:
        name, form = found
        raise stopping(f"the request carries the value of {name} ({form}): the gateway refused it and sent nothing. "
                       "A file the seed reads (goal.md, pending_tasks.md or a file of the codebase) holds it: take it "
                       "out, and change the secret if that file was ever shared")
    return body
