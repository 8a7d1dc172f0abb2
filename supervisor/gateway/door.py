"""door: the gateway's HTTP side on loopback: it checks the caller before it reads, and bounds what it holds.

    server = serve(gateway)   # a ThreadingHTTPServer on 127.0.0.1:0, serving in daemon threads

Each POST goes to gateway.serve(path, token, read_body): the path and the run's token are checked first, and
only then is the body read, and only when its Content-Length is at most MAX_BODY (else 413, unread). At most
MAX_CONNECTIONS connections are served at once (more are closed at once), and a connection that sends nothing
for IDLE seconds is closed, so idle connections cannot each hold a thread. Nothing is logged: the gateway says
what matters.
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .outcomes import Reply

MAX_BODY = 4 * 2 ** 20    # bytes of a request of the seed's (a prompt of 60,000 tokens takes about 200 kB)
MAX_CONNECTIONS = 16      # connections served at once
IDLE = 30.0               # seconds a connection may send nothing (a request's wait inside the gateway is not idle)
ONLY = "the gateway serves only POST /v1beta/models/{model}:generateContent"


class BoundedServer(ThreadingHTTPServer):
    """A threading server that serves at most MAX_CONNECTIONS connections at once."""
    daemon_threads = True
    request_queue_size = 64  # connections waiting to be accepted (or closed at once, past MAX_CONNECTIONS)

    def __init__(self, address, handler):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def handle_error(self, request, client_address):
        """A connection that broke or idled out is the caller's affair: no traceback on the console."""

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def serve(gateway):
    """Serve the gateway on 127.0.0.1 at a free port, in daemon threads."""
    server = BoundedServer(("127.0.0.1", 0), handler_for(gateway))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def handler_for(gateway):
    """The HTTP side: each POST goes to gateway.serve with a reader of its body, bounded."""

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE

        def do_POST(self):
            self.close_connection = True  # one request a connection: an unread body never becomes the next request
            self.send(*gateway.serve(self.path, self.headers.get("x-goog-api-key", ""), self.read_body))

        def read_body(self):
            """The request's body, when its Content-Length says it is at most MAX_BODY bytes."""
            length = self.headers.get("Content-Length", "")
            if not length.isdigit():
                raise Reply(411, "INVALID_ARGUMENT", "send the body with a Content-Length")
            if int(length) > MAX_BODY:
                raise Reply(413, "INVALID_ARGUMENT", f"the request is over {MAX_BODY // 2 ** 20} MB: not read")
            return self.rfile.read(int(length))

        def do_GET(self):
            self.send(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": ONLY}})

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
