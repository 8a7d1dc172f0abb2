"""status: what a person asks the keeper without running the loop: --status and --models.

Neither makes a generation request: --status reads the log, the tasks, the gateway's ledger and memory and
backups/; --models asks the API (or the local server) which models it offers.
"""
import os
import re
from datetime import datetime, timezone

from . import backends
from .console import printable
from .ledger import pacific_day
from .settings import BACKUPS, INDEX, LOG, QUOTA, TASKS, USAGE, load_json
from .snapshots import current, load_index, retention, run_worked


def show_status(holder):
    """What a person wants to know at a glance; makes no model request."""
    print(f"supervisor: running (pid {holder})" if holder else "supervisor: not running")
    log = LOG.read_text("utf-8", "replace") if LOG.exists() else ""
    headings = re.findall(r"^## (Iteration \d+ — .*)$", log, re.M)
    print(f"iterations: {len(headings)} logged" + ("; the last ones:" if headings else ""))
    for heading in headings[-5:]:
        print(f"  {printable(heading)}")
    tasks = re.findall(r"^\s*[-*] \[ \] (.*)$", TASKS.read_text("utf-8", "replace"), re.M) if TASKS.exists() else []
    print(f"pending tasks: {len(tasks)} open")
    for task in tasks[:5]:
        print(f"  - {printable(task[:100])}")
    today, quota, now = load_json(USAGE).get(pacific_day(), {}), load_json(QUOTA), datetime.now(timezone.utc)
    models = backends.chosen_models(os.environ)  # GEMINI_MODEL's, or OPENAI_MODEL's with a server of one's own
    print(f"models today (Pacific day {pacific_day()}):")
    for model in dict.fromkeys(models + list(today) + list(quota)):
        use = today.get(model, {})
        wasted = sum(use.get("wasted", {}).values())
        print(f"  {model:<28} {use.get('requests', 0):>3} request(s), {wasted} wasted, "
              f"{use.get('prompt', 0) + use.get('output', 0) + use.get('thinking', 0):>9,} tokens  "
              f"{model_state(quota.get(model, {}), now)}")
    index = load_index() if INDEX.exists() else {"snapshots": []}
    print(f"backups: {len(index['snapshots'])} snapshot(s), {disk_use(BACKUPS) / 1e6:.1f} MB; {where_it_stands(index)}")
    print(f"  {retention(index)}")
    return 0


def where_it_stands(index):
    """Which snapshot the codebase is now, and the newest one a run from worked (where a walk-back would go)."""
    now, worked = current(index), [e["id"] for e in index["snapshots"] if e["good"]]
    state = (f"the codebase now is snapshot {now['id']} ({now['kind']}, a run from it worked: {run_worked(now)})"
             if now else "the codebase now is in no snapshot (edited since the last one)")
    return f"{state}; the newest a run worked from: {worked[-1] if worked else 'none yet'}"


def model_state(entry, now):
    """ok, or spent / gone until a local time, from the gateway's memory."""
    try:
        until = datetime.fromisoformat(entry["until"])
        if until > now:
            return f"{entry.get('why', 'blocked')} until {until.astimezone():%a %H:%M} local"
    except (KeyError, TypeError, ValueError):
        pass
    return "ok"


def disk_use(folder):
    """Bytes the files under folder take, each hard-linked file counted once."""
    sizes = {}
    for path in folder.rglob("*") if folder.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            sizes[stat.st_dev, stat.st_ino] = stat.st_size
    return sum(sizes.values())


def list_models():
    """The models Gemini (or the server at OPENAI_BASE_URL) offers: one request that spends no generation quota."""
    return backends.list_models(os.environ)
