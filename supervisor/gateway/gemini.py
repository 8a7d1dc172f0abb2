"""gemini: the gateway's backend for Gemini's REST API (generativelanguage.googleapis.com).

    backend = Gemini(upstream, key, models)     # a ValueError names the setting to fix
    backend.ask(model, body, facts)             # an outcomes.Reading for one generateContent request
    show_models(environ)                        # python fallback.py --models

The seed already speaks this format: a request goes on as the gateway adapted it, with the key in the
x-goog-api-key header (never in a URL), and its answer comes back as it is. What this file knows is how
Gemini says things: a 429's QuotaFailure and RetryInfo (per minute, per day, credits depleted), a refused
feature ("JSON mode is not enabled for models/X", whatever the status), a key refused (401/403,
API_KEY_INVALID, the misleading "Expected OAuth 2 access token"), a free tier not offered in a region, a
model gone (404); an error body wrapped in a one-item list, as Google's SDK unwraps it, is read the same.
Its prompt budget is the model's input tokens a minute, under the gateway's margin.
"""
import json
import os
import re
from urllib.parse import quote

import requests

from .answers import FOLD_TOKENS, MARGIN
from .models import DEFAULT_MODELS
from .outcomes import Kind, Reading, TooLarge, fetch_bounded, json_of, names, one_line

API_BASE = "https://generativelanguage.googleapis.com"  # where Gemini lives when GEMINI_API_BASE is unset
TIMEOUT = (10, 300)       # seconds to connect upstream, and to wait for an answer (Gemma 4 31b can take a minute)
USEFUL_BUDGET = 4_000     # a model whose minute takes a smaller prompt than this is not planned
BARE_429_WAIT = 60.0      # seconds to wait after a 429 that says neither which limit nor how long
TRANSIENT = {408, 500, 502, 503, 504}
FEATURE_NAMES = {"json_mode": r"json mode|response ?mime ?type|response ?schema",
                 "system_instruction": r"developer instruction|system ?instruction"}  # as a refusal names them
KEY_HELP = "Fix GEMINI_API_KEY in .env (a free key: https://aistudio.google.com/apikey)."


def chosen_by(environ):
    """Gemini serves when no other backend is set up: it is the default."""
    return True


def from_env(environ):
    """The backend as the settings in `environ` describe it."""
    return Gemini(environ.get("GEMINI_API_BASE", "").strip() or API_BASE, environ.get("GEMINI_API_KEY", "").strip(),
                  names(environ.get("GEMINI_MODEL", "").strip() or DEFAULT_MODELS), environ.get("GEMINI_LIMITS", ""))


class Gemini:
    """Gemini's generateContent, with per-minute and per-day quotas."""
    local = False
    answer_format = "json"  # Gemini keeps the seed's schema in strict JSON mode (answers.adapt)
    key_name = "GEMINI_API_KEY"  # the setting holding the key: errors name it, redaction shows it
    model_help = ("Set GEMINI_MODEL in .env to models this key can call (python fallback.py --models lists them); a "
                  "model that answered 404 is asked again after a day, or at once if you delete {quota}")

    def __init__(self, upstream, key, models, limits=None):
        if not key:
            raise ValueError("GEMINI_API_KEY is not set: put it in .env as  GEMINI_API_KEY=your-key")
        if not re.match(r"https?://[^/\s]+", upstream):
            raise ValueError(f"GEMINI_API_BASE is not a usable URL: {upstream!r}")
        if not models:
            raise ValueError("GEMINI_MODEL names no model: list one or more, best first, separated by commas")
        for model in models:
            if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", model):
                raise ValueError(f"GEMINI_MODEL: {model!r} is not a model's name (letters, digits, dots, dashes: "
                                 "python fallback.py --models lists them)")
        self.upstream, self.key, self.models = upstream.rstrip("/"), key, models
        self.limits = os.environ.get("GEMINI_LIMITS", "") if limits is None else limits

    def prepare(self, models):
        """Nothing to ask before planning: the figures are in models.py."""
        return None

    def room(self, model, facts):
        """The largest prompt that fits the model's input tokens a minute, with a margin and room for the fold."""
        return int((facts["tpm"] - FOLD_TOKENS) / MARGIN)

    def hindrance(self, model, facts):
        """One line when the model's minute takes too small a prompt to be of use, else None."""
        if self.room(model, facts) < USEFUL_BUDGET:
            return f"{model}: takes only {facts['tpm']:,} input tokens a minute"
        return None

    def make_room(self, model, tokens):
        return "shorten them"

    def ask(self, model, body, facts):
        """The outcome of one generateContent request to the model."""
        try:
            response = fetch_bounded("POST", f"{self.upstream}/v1beta/models/{quote(model, safe='')}:generateContent",
                                     body, {"x-goog-api-key": self.key}, TIMEOUT)
        except TooLarge as error:
            return Reading(Kind.UNUSABLE, "unusable answer", f"Gemini sent {error}: not read")
        except requests.RequestException as error:
            hint = "check the network" if self.upstream == API_BASE else "check the network, or GEMINI_API_BASE in .env"
            return Reading(Kind.RETRY_LATER, "network error", f"cannot reach {self.upstream} ({type(error).__name__}): "
                                                              f"{hint}")
        if response.status_code != 200:
            return read_refusal(*read_error(response))
        body = json_of(response)
        if not isinstance(body, dict):
            return Reading(Kind.UNUSABLE, "unusable answer", f"the API's answer is not a JSON object: "
                                                              f"{response.text[:80]!r}")
        return Reading(Kind.ANSWER, "answer", body=body)


# --- errors ---------------------------------------------------------------------------------------
def read_error(response):
    """(code, status, message, details) of an error answer, whatever its body (one wrapped in a list included)."""
    body = json_of(response, (dict, list))
    if isinstance(body, list) and len(body) == 1:  # [{"error": ...}], as Google's SDK unwraps it
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return response.status_code, "", response.text[:200], []
    details = error.get("details") if isinstance(error.get("details"), list) else []
    code = error.get("code")
    return code if isinstance(code, int) else response.status_code, str(error.get("status", "")), \
        str(error.get("message", "")), [detail for detail in details if isinstance(detail, dict)]


def read_refusal(code, status, message, details):
    """The outcome an error answer means, by what it says as much as by its status."""
    said, (scope, figure) = f"{code} {status}: {one_line(message)}", read_quota(message, details)
    if code == 429 and "credits are depleted" in message:
        return Reading(Kind.KEY_REFUSED, "429 credits depleted", f"Gemini says the prepayment credits of this key's "
                       f"project are used up ({said}): add credits, or use a key of a free-tier project")
    if code == 429 and (scope == "rpd" or re.search(r"limit: 0\b", message)):
        return Reading(Kind.QUOTA_SPENT, "429 per day", "daily quota spent", learned={"rpd": figure} if figure else {})
    if code == 429:
        delay = retry_delay(message, details)
        label = "429 per minute" if scope else "429 without details"
        return Reading(Kind.RETRY_LATER, label, f"per-minute limit ({label})",
                       delay=BARE_429_WAIT if delay is None else delay + min(1.0, delay / 10),
                       learned={scope: figure} if scope in ("rpm", "tpm") and figure else {})
    if feature := refused_feature(message):
        return Reading(Kind.REFUSED_FEATURE, "feature refused", f"Gemini refused the request ({said})", feature=feature,
                       status=code if 400 <= code < 500 else 502)
    if code in TRANSIENT:
        return Reading(Kind.RETRY_LATER, f"server error {code}", f"answered {said}")
    if code == 404:
        return Reading(Kind.MODEL_NOT_FOUND, "model not found", f"answered {said}")
    if status == "FAILED_PRECONDITION":
        return Reading(Kind.KEY_REFUSED, "free tier unavailable", f"Gemini's free tier is not available here ({said}). "
                       "See https://ai.google.dev/gemini-api/docs/available-regions")
    if code in (401, 403) or "API_KEY_INVALID" in json.dumps(details):
        return Reading(Kind.KEY_REFUSED, "key refused", key_refusal(code, status, message, details))
    return Reading(Kind.UNUSABLE, f"bad request {code}" if 400 <= code < 500 else f"unexpected {code}",
                   f"Gemini refused the request ({said})", status=code if 400 <= code < 500 else 502)


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
    """The feature an error says the model refuses ("... is not enabled for models/X"), or None."""
    if re.search(r"not (enabled|supported)", message, re.I):
        for feature, names_ in FEATURE_NAMES.items():
            if re.search(names_, message, re.I):
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


# --- python fallback.py --models ------------------------------------------------------------------
def show_models(environ):
    """Print the models this key can call, with their limits; a ConnectionError or ValueError says what failed."""
    base = (environ.get("GEMINI_API_BASE", "").strip() or API_BASE).rstrip("/")
    try:
        response = fetch_bounded("GET", f"{base}/v1beta/models?pageSize=1000", None,
                                 {"x-goog-api-key": environ.get("GEMINI_API_KEY", "").strip()}, (10, 30))
    except requests.RequestException as error:
        hint = "check the network" if base == API_BASE else "check the network, or GEMINI_API_BASE in .env"
        raise ConnectionError(f"cannot reach {base} ({type(error).__name__}): {hint}") from None
    if response.status_code != 200:
        _, _, message, _ = read_error(response)
        raise ValueError(f"Gemini refused to list models ({response.status_code}): {message} Check GEMINI_API_KEY in "
                         ".env.")
    models = (json_of(response) or {}).get("models")
    chosen = names(environ.get("GEMINI_MODEL", ""))
    used, mark = (chosen, "yes") if chosen else (names(DEFAULT_MODELS), "default")
    print(f"{'model':<34} {'input tokens':>12} {'output tokens':>13}  in GEMINI_MODEL")
    for model in (entry for entry in models or [] if isinstance(entry, dict)):
        name = str(model.get("name", "")).removeprefix("models/")
        if "generateContent" in model.get("supportedGenerationMethods", []):
            print(f"{name:<34} {model.get('inputTokenLimit', 0):>12,} {model.get('outputTokenLimit', 0):>13,}  "
                  f"{mark if name in used else ''}")
    if not chosen:
        print(f"GEMINI_MODEL is not set: the default list is used ({DEFAULT_MODELS})")


def chosen_models(environ):
    return names(environ.get("GEMINI_MODEL", "").strip() or DEFAULT_MODELS)
