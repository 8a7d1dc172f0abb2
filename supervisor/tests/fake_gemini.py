"""A fake Gemini REST server on 127.0.0.1:0: scripted replies in the real shapes, every request recorded (with
the bytes it came as, "raw", and the bytes sent back, "sent").

Bodies are modelled on recorded generativelanguage.googleapis.com traffic (thought parts,
thoughtSignature, usageMetadata, google.rpc error details), written out here so tests need no network.
"""
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeGemini:
    """Replies are queued per model (or for any model) and served in order; requests are kept."""

    def __init__(self):
        self.replies = {}  # model or None -> deque of (status, body, delay, hook)
        self.model_list = model_list()  # what GET /v1beta/models answers: a body, or an error body
        self.requests = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def reply(self, body, model=None, delay=0.0, hook=None, cut=False):
        """Queue a reply (an error body is sent with its own code, one wrapped in a list too); `hook(request)`
        runs before it is sent; `cut` sends half the body and closes the connection."""
        error_body = body[0] if isinstance(body, list) and body else body
        status = error_body["error"]["code"] if "error" in error_body else 200
        self.replies.setdefault(model, deque()).append((status, body, delay, hook, cut))
        return self

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def prompts(self):
        return [r["body"]["contents"][0]["parts"][0]["text"] for r in self.requests]

    def models_asked(self):
        return [r["model"] for r in self.requests]

    def next_reply(self, request):
        """(status, body, delay, hook, cut) for a generateContent request; a subclass may decide otherwise."""
        for queue in (self.replies.get(request["model"]), self.replies.get(None)):
            if queue:
                return queue.popleft()
        return 500, error(500, "INTERNAL", "fake: no reply scripted for this request"), 0.0, None, False

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                match = re.fullmatch(r"/v1(?:beta)?/models/([^/:]+):generateContent", self.path)
                raw = self.rfile.read(length)
                request = {"path": self.path, "model": match and match.group(1), "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": json.loads(raw or b"null"), "raw": raw}
                fake.requests.append(request)
                status, body, delay, hook, cut = fake.next_reply(request) if match else \
                    (404, error(404, "NOT_FOUND", "fake: unknown path"), 0.0, None, False)
                if hook:
                    hook(request)
                time.sleep(delay)
                data = json.dumps(body).encode()
                request["sent"] = data[:len(data) // 2] if cut else data
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json; charset=UTF-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[:len(data) // 2] if cut else data)
                    self.close_connection = cut
                except OSError:  # the client gave up waiting
                    pass

            def do_GET(self):
                fake.requests.append({"path": self.path, "model": None, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": None})
                body = fake.model_list if self.path.startswith("/v1beta/models") else error(404, "NOT_FOUND", "no")
                data = json.dumps(body).encode()
                self.send_response(body["error"]["code"] if "error" in body else 200)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler


# --- reply bodies, in the shapes the real API sends -----------------------------------------------
def model_list():
    """GET /v1beta/models: generation models and one embedding model that cannot generate."""
    def model(name, methods, output=65536):
        return {"name": f"models/{name}", "version": "001", "displayName": name, "inputTokenLimit": 1048576,
                "outputTokenLimit": output, "supportedGenerationMethods": methods}
    generate = ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"]
    return {"models": [model("gemini-3.5-flash", generate), model("gemini-2.5-flash-lite", generate),
                       model("gemini-embedding-001", ["embedContent", "countTokens"], 1)]}


def usage(prompt=1200, output=300, thinking=150):
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "thoughtsTokenCount": thinking,
            "totalTokenCount": prompt + output + thinking,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}


def answer(files=(), tasks=("task one", "task two", "task three"), done=(), model="gemini-3.5-flash"):
    """A complete JSON-mode answer: a thought part, then the JSON text with a thoughtSignature."""
    payload = {"tasks": list(tasks), "done": list(done), "files": [{"path": p, "content": c} for p, c in files]}
    return text_answer(json.dumps(payload), model=model)


def text_answer(text, finish="STOP", model="gemini-3.5-flash"):
    parts = [{"text": "**Planning the change**\n\nI will plan three tasks and write the files.", "thought": True},
             {"text": text, "thoughtSignature": "EpwCCpkCAQw51sdPTqr6sgqYCryTFmqePNh0HIORLnRkhtUCaX99hlZy"}]
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}],
            "modelVersion": model, "responseId": "4q8MarKdCf2Fz7IP2PffmQk", "usageMetadata": usage()}


def max_tokens(with_parts):
    """Cut off: recorded both with a partial text part and with no parts key at all."""
    if with_parts:
        return text_answer('{"tasks": ["one", "two"], "files": [{"path": "a.py", "content": "x = ', "MAX_TOKENS")
    return {"candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}],
            "modelVersion": "gemini-3.5-flash", "responseId": "fH8oaunbEbr9qtsPjYGX4A0",
            "usageMetadata": {"promptTokenCount": 15, "thoughtsTokenCount": 2, "totalTokenCount": 17}}


def blocked():
    return {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 900}}


def error(code, status, message, details=None):
    body = {"error": {"code": code, "message": message, "status": status}}
    if details is not None:
        body["error"]["details"] = details
    return body


def per_minute(delay="0.2s"):
    return error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing "
                 "details.", [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                     {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                      "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaValue": "10"}]},
                     {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}])


def per_day(model="gemini-3.5-flash"):
    """The daily quota: its RetryInfo says 38s, yet nothing succeeds before midnight Pacific."""
    return error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing "
                 "details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/"
                 f"generate_content_free_tier_requests, limit: 20, model: {model}\nPlease retry in 38.90923309s.",
                 [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                     {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaValue": "20"}]},
                  {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"}])


def key_invalid(key):
    """A rejected key: the real body echoes the key back in DebugInfo, so it must never be printed."""
    return error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com",
         "metadata": {"service": "generativelanguage.googleapis.com"}},
        {"@type": "type.googleapis.com/google.rpc.DebugInfo", "detail": f"Invalid API key: {key}"}])


def wrapped(body):
    """An error body in a one-item list, as the API has been seen to send it (Google's SDK unwraps it)."""
    return [body]


def model_gone(model):
    return error(404, "NOT_FOUND", f"This model models/{model} is no longer available to new users. Please update "
                 "your code to use a newer model for the latest features and improvements.")


def overloaded():
    return error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")


def clean(files=(), tasks=("task one", "task two", "task three"), done=()):
    """An answer as the keeper's gateway hands it to the seed: the JSON object alone, in one text part."""
    payload = {"tasks": list(tasks), "done": list(done), "files": [{"path": p, "content": c} for p, c in files]}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": json.dumps(payload)}]},
                            "finishReason": "STOP", "index": 0}], "usageMetadata": usage(), "modelVersion": "gemini-3.5-flash"}
