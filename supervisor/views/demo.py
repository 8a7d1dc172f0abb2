"""demo: a few real iterations of the loop, offline, in a throwaway copy, against a scripted model.

`python fallback.py --demo` copies the workspace (the codebase and the keeper, not .env), gives it the
demo's goal, serves supervisor/demo.json in Gemini's shape on loopback, and runs the copy's fallback.py
against it: no key, no network, the user's files untouched. The copy stays in the temporary folder for its page
to be read; the demo keeps the newest KEPT of its copies there and takes the older ones away.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .console import say
from ..settings import DEMO, LOG, ROOT, TASKS, TEST_SUPPORT, keeper_code
from ..store.snapshots import codebase_files


KEPT = 3  # demo copies kept in the temporary folder (each marked as the demo's, so nothing else is taken away)
MARK = ".seed-demo"


def run_demo():
    """A few real iterations against a scripted model on loopback, in a throwaway copy: no key, no network."""
    script = json.loads(DEMO.read_text())
    take_away_old_copies()
    made = Path(tempfile.mkdtemp(prefix="seed-demo-"))
    (made / MARK).write_text("a copy python fallback.py --demo made; a later demo takes it away\n")
    copy = made / "workspace"
    keeper = [p.relative_to(ROOT).as_posix() for p in keeper_code()] + TEST_SUPPORT
    for rel in [rel for rel, _ in codebase_files()] + keeper + ["fallback.py", "evaluate.py", "supervisor/demo.json"]:
        if (ROOT / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
    (copy / "goal.md").write_text(script["goal"])
    (copy / "pending_tasks.md").write_text("# Pending tasks\n\n")
    (copy / "iteration_log.md").unlink(missing_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), scripted_model(script["answers"]))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    env.update(GEMINI_API_KEY="demo-offline", GEMINI_MODEL="demo-scripted-model",
               GEMINI_LIMITS="demo-scripted-model=1000/10000000/100000",  # a local script: no free-tier pacing
               GEMINI_API_BASE=f"http://127.0.0.1:{server.server_address[1]}")
    say(f"demo: {len(script['answers'])} iterations of the real loop in a throwaway copy ({copy}), with a scripted "
        "model instead of Gemini; your files are not touched")
    keeper = subprocess.Popen([sys.executable, str(copy / "fallback.py"), "--iterations", str(len(script["answers"])),
                               "--delay", "1"], env=env)
    try:
        code = keeper.wait()
    except KeyboardInterrupt:  # Ctrl+C reached the copy's keeper too: it stops cleanly; its copy is still worth a look
        code = keeper.wait()
    finally:
        server.shutdown()
    print(f"\nThe demo's copy is {copy}\n  its page:  {copy / 'report.html'} (open it in a browser)\n"
          f"  its log:   {copy / LOG.name}\n  its tasks: {copy / TASKS.name}\n"
          f"  its record: cd {copy} && python fallback.py --show 2  (or --status, --list-backups, --replay)\n"
          + ("Next: " if os.environ.get("GEMINI_API_KEY", "").strip() else "Next: get a free key at "
             "https://aistudio.google.com/apikey, put it in .env as GEMINI_API_KEY=..., ")
          + "write your goal in goal.md, and run  python fallback.py")
    return code


def take_away_old_copies():
    """Remove the demo's own older copies in the temporary folder, keeping the newest KEPT - 1 (and this one)."""
    mine = [folder for folder in Path(tempfile.gettempdir()).glob("seed-demo-*")
            if (folder / MARK).is_file() and folder.stat().st_uid == os.getuid()]
    for folder in sorted(mine, key=lambda folder: folder.stat().st_mtime)[:-(KEPT - 1) or None]:
        shutil.rmtree(folder, ignore_errors=True)


def scripted_model(answers):
    """A request handler that answers generateContent in Gemini's shape, with the next scripted answer."""
    queue = deque(answers)

    class ScriptedModel(BaseHTTPRequestHandler):
        def do_POST(self):
            prompt = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            text = json.dumps(queue.popleft() if queue else {"tasks": [], "files": []})
            data = json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                               "finishReason": "STOP", "index": 0}],
                               "usageMetadata": {"promptTokenCount": len(prompt) // 4,
                                                 "candidatesTokenCount": len(text) // 4},
                               "modelVersion": "demo-scripted-model"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return ScriptedModel
