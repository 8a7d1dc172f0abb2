"""ledger: the gateway's books: what was asked of each model (usage.json) and when each may be asked (quota.json).

    books = Books(Path("backups"))
    books.requests_today(model)           # today's requests that may have reached the server
    books.count_sent(model) / books.count_returned(call, day, kind)   # every request, booked before it leaves
    books.derive(ledger); books.unrecorded(ledger, calls)   # usage.json made from the record; what it lacks
    books.mark(model, "spent", until) ; books.blocked(model)          # a day spent, a model gone
    books.pace_wait(model, weight, facts) ; books.book(model, weight) # the sliding minute of requests and tokens

usage.json: per Pacific day and model, requests, tokens (prompt, output, thinking), kinds of answer and waste; the last
USAGE_DAYS days only, so that booking a request costs the same after a year. The record (backups/record.sqlite) is
the truth of what was asked: usage.json is made from it after each iteration's row (derive), and between rows it
books each request as it leaves, so that one cut short (Ctrl+C, kill -9, a full disk) still counts against the day;
what it booked that the record lacks becomes requests of the row the next start writes (unrecorded).
quota.json: per model, spent or gone until when, and its last minute's requests as [unix time, tokens].
Not thread-safe: the gateway calls it under its lock.
"""
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..kinds import TOKEN_FIELDS
from ..settings import load_json, save_json

USAGE_DAYS = 7  # Pacific days usage.json keeps
KINDS = ("kinds", "wasted")  # a use's counts of its requests by kind of answer, and of waste by why
UNREACHED = "network error"  # the kind of a request that never reached the server
WINDOW = 61.0  # seconds: the sliding window of the per-minute limits, with a second for the time a request takes
               # to reach the API (booked as it leaves, counted there as it arrives)
BLOCKED = {"spent": "daily quota spent",  # why a model in quota.json may not be asked before its time
           "gone": "not found (404: retired, misspelled or not open to this key)"}


class Books:
    """usage.json and quota.json under `state`."""

    def __init__(self, state):
        self.usage, self.quota_path = Path(state) / "usage.json", Path(state) / "quota.json"
        self.quota = {model: entry for model, entry in load_json(self.quota_path).items() if isinstance(entry, dict)}

    def requests_today(self, model):
        """Today's requests to the model that may have reached the server (an outage must not spend a day)."""
        return reached(self.booked().get(pacific_day(), {}).get(model, {}))

    def blocked(self, model):
        """(why, until when, one line) while the model may not be asked (its day spent, or gone), else None."""
        entry = self.quota.get(model, {})
        until = read_time(entry.get("until"))
        if until and until > utc_now() and entry.get("why") in BLOCKED:
            return entry["why"], until, f"{model}: {BLOCKED[entry['why']]}"
        return None

    def mark(self, model, why, until):
        """Remember that a model cannot be asked before `until`: its day is spent, or it is gone."""
        self.quota.setdefault(model, {}).update(until=until.isoformat(), why=why)
        save_json(self.quota_path, self.quota)

    def recent(self, model):
        """The model's requests of the last minute, oldest first, as [unix time, tokens]."""
        now = time.time()
        return sorted(r for r in self.quota.get(model, {}).get("recent", []) if isinstance(r, list) and len(r) == 2
                      and all(isinstance(n, (int, float)) for n in r) and now - r[0] < WINDOW)

    def pace_wait(self, model, weight, facts):
        """Seconds until a request of `weight` tokens keeps the model under its requests and tokens a minute."""
        recent, now = self.recent(model), time.time()
        wait = recent[-facts["rpm"]][0] + WINDOW - now if len(recent) >= facts["rpm"] else 0.0
        used = sum(tokens for _, tokens in recent)
        for sent, tokens in recent:  # the oldest leave the window first
            if used + min(weight, facts["tpm"]) <= facts["tpm"]:
                break
            used -= tokens
            wait = max(wait, sent + WINDOW - now)
        return wait

    def book(self, model, weight):
        """Count a request of `weight` tokens in the model's minute, as it leaves."""
        self.quota.setdefault(model, {})["recent"] = self.recent(model) + [[time.time(), weight]]
        save_json(self.quota_path, self.quota)

    def count_sent(self, model):
        """(the call, its day): a request booked in the ledger before it is sent, so one cut short still counts."""
        day = pacific_day()
        call = {"model": model, "day": day, "kind": "no answer", "tokens": dict.fromkeys(TOKEN_FIELDS, 0)}
        ledger = recent_days(self.booked())
        entry(ledger, day, model)["requests"] += 1
        save_json(self.usage, ledger)
        return call, day

    def derive(self, ledger):
        """usage.json made anew from the record's ledger ({day: {model: use}}, record.ledger()): its last days."""
        save_json(self.usage, recent_days(ledger))

    def unrecorded(self, ledger, calls=()):
        """The calls usage.json booked that neither the record's ledger nor `calls` (a row about to be written) holds:
        each a request that may have reached the model, cut short before its iteration's row was written; its day
        and model known, its tokens not."""
        lacking = []
        for day, models in recent_days(self.booked()).items():
            for model, use in models.items():
                held = ledger.get(day, {}).get(model, {}).get("requests", 0) + sum(
                    call.get("day") == day and call.get("model") == model for call in calls)
                lacking += [{"model": model, "day": day, "kind": "no answer", "tokens": dict.fromkeys(TOKEN_FIELDS, 0)}
                            for _ in range(min(use.get("requests", 0) - held, 1_000))]
        return lacking

    def booked(self):
        """usage.json as {day: {model: use}}, each use whole (counts that are numbers): what a hand edit left of
        another shape is left out, never a failure of the gateway's."""
        ledger = {}
        for day, models in load_json(self.usage).items():
            for model, use in models.items() if isinstance(models, dict) else ():
                if isinstance(use, dict) and counts(use, ("requests", *TOKEN_FIELDS)) and \
                        all(isinstance(use.get(name, {}), dict) and counts(use.get(name, {})) for name in KINDS):
                    ledger.setdefault(day, {})[model] = use
        return ledger

    def count_returned(self, call, day, kind):
        """Book what an upstream request came back as: its kind, its tokens, and as waste unless an answer."""
        call["kind"] = kind
        ledger = self.booked()
        use = entry(ledger, day, call["model"])
        for name, count in call["tokens"].items():
            use[name] += count
        bump(use["kinds"], kind)
        if kind != "answer":
            bump(use["wasted"], kind)
        save_json(self.usage, ledger)


def recent_days(ledger):
    """The ledger's last USAGE_DAYS Pacific days."""
    oldest = (date.fromisoformat(pacific_day()) - timedelta(days=USAGE_DAYS - 1)).isoformat()
    return {day: use for day, use in ledger.items() if day >= oldest}


def counts(use, names=None):
    """Whether the named values of a use (all of them by default) are whole numbers, or missing."""
    return all(type(use.get(name, 0)) is int for name in (use if names is None else names))


def reached(use):
    """Of a day's use of a model, the requests that may have reached the server: those its quota counts."""
    return use.get("requests", 0) - use.get("kinds", {}).get(UNREACHED, 0)


def entry(ledger, day, model):
    """The ledger's counts for a model on a Pacific day, made if missing."""
    use = ledger.setdefault(day, {}).setdefault(model, {})
    for name in ("requests", *TOKEN_FIELDS):
        use.setdefault(name, 0)
    for name in KINDS:
        use.setdefault(name, {})
    return use


def bump(counts, name):
    counts[name] = counts.get(name, 0) + 1


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
