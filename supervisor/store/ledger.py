"""ledger: the gateway's books of when each model may be asked (quota.json), and the free tier's Pacific days.

    books = Books(Path("backups"))
    books.mark(model, "spent", until) ; books.blocked(model)          # a day spent, a model gone
    books.pace_wait(model, weight, facts) ; books.book(model, weight) # the sliding minute of requests and tokens
    reached(use); pacific_day(); next_pacific_midnight()

quota.json: per model, spent or gone until when, and its last minute's requests as [unix time, tokens]. What was
asked of each model is counted in the record alone (record.Sent books each request as it leaves).
Not thread-safe: the gateway calls it under its lock.
"""
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..settings import load_json, save_json, utc_now

UNREACHED = "network error"  # the kind of a request that never reached the server
WINDOW = 61.0  # seconds: the sliding window of the per-minute limits, with a second for the time a request takes
               # to reach the API (booked as it leaves, counted there as it arrives)
BLOCKED = {"spent": "daily quota spent",  # why a model in quota.json may not be asked before its time
           "gone": "not found (404: retired, misspelled or not open to this key)"}


class Books:
    """quota.json under `state`."""

    def __init__(self, state):
        self.quota_path = Path(state) / "quota.json"
        self.quota = {model: entry for model, entry in load_json(self.quota_path).items() if isinstance(entry, dict)}

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


def reached(use):
    """Of a day's use of a model, the requests that may have reached the server: those its quota counts."""
    return use.get("requests", 0) - use.get("kinds", {}).get(UNREACHED, 0)


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
