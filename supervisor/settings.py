"""settings: the workspace's paths and the keeper's limits, in one place, and how its files are written.

Every part of the keeper imports this; it imports none of them. Settings come from the environment as it is when
this is imported: fallback.py puts the workspace's .env in it first (envfile.load; real environment variables win),
so a value in .env counts everywhere. Importing this reads no file.
"""
import difflib
import json
import os
import re
import secrets
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the workspace: the folder holding fallback.py
PROBLEMS = []  # settings that cannot be used, each as one line saying what to fix (preflight.py says the first)

KNOWN = {  # every setting the keeper reads (a test holds this list to the code), each in docs/settings.md
    "GEMINI_API_KEY", "GEMINI_MODEL", "GEMINI_LIMITS", "GEMINI_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_KEY",
    "OPENAI_MODEL", "OPENAI_CONTEXT_TOKENS", "OPENAI_ANSWER_FORMAT", "BACKUPS_KEEP", "SEED_BACKOFF",
    "SEED_BACKUPS_MB", "SEED_CPU_SECONDS",
    "SEED_EVALUATE_SECONDS", "SEED_FAULT_PAUSE", "SEED_FILE_MB", "SEED_FULL_GATE_EVERY", "SEED_GATE_SECONDS",
    "SEED_KEEP_DAILY_DAYS", "SEED_KEEP_LANDED_DAYS", "SEED_LAND_ON", "SEED_LANDING_FILES", "SEED_LANDING_MB",
    "SEED_LOG_MB",
    "SEED_MEMORY_MB", "SEED_NAMESPACES", "SEED_OPEN_FILES", "SEED_PARALLEL_FROM", "SEED_PROCESSES",
    "SEED_PROMPT_TOKENS", "SEED_RATCHET", "SEED_REPLAY", "SEED_REPLAY_FROM", "SEED_REQUESTS_PER_RUN", "SEED_SANDBOX",
    "SEED_SCORE_TOLERANCE", "SEED_SHM_MB", "SEED_WORK_FILES", "SEED_WORK_MB", "SEED_DOT_NAMES", "SEED_SECRETS",
    "SEED_ZYGOTE"}
OURS = ("GEMINI_", "OPENAI_", "SEED_", "BACKUPS_")  # the prefixes of the keeper's settings


def unknown_settings(environ, written):
    """A line for each setting of the keeper's kind that it does not know: every such name in .env, whose names are
    `written` (a typo there is a setting silently lost), and a name in the environment only when it looks like a
    known one; with the known setting it resembles. A key with a space inside is one too (no key has one)."""
    problems = []
    for name in sorted({n for n in environ if n.startswith(OURS)} - KNOWN):
        like = difflib.get_close_matches(name, KNOWN, n=1, cutoff=0.75)
        if name in written or like:
            where = ".env" if name in written else "the environment"
            problems.append(f"{name} in {where} is not a setting the keeper knows" + (f": did you mean {like[0]}?" if
                            like else " (docs/settings.md lists them): remove it or fix its name"))
    for name in ("GEMINI_API_KEY", "OPENAI_API_KEY"):
        if len(environ.get(name, "").strip().split()) > 1:
            problems.append(f"{name} has a space inside it: copy the key again, whole, as one word")
    return problems


def number(name, default, least, kind=int):
    """A numeric setting from the environment; a value that is not a number, or below `least`, is a problem."""
    text = os.environ.get(name, "").strip().replace("_", "")
    try:
        value = kind(text) if text else default
        if value >= least:
            return value
    except ValueError:
        pass
    PROBLEMS.append(f"{name}={os.environ[name]!r} is not a {'whole ' if kind is int else ''}number of at least "
                    f"{least}: fix it in .env or the environment (the default is {default:g})")
    return default


BACKUPS = ROOT / "backups"
INDEX = BACKUPS / "index.json"          # the snapshots, which are known good, the iteration count
OBJECTS = BACKUPS / "objects"           # every content a snapshot holds, once, named by its sha256
RESTORING = BACKUPS / "restoring.json"  # exists only while a restore is under way
RUNNING = BACKUPS / "running.json"      # exists only while a child runs: what a killed supervisor left behind
UNDER_WAY = BACKUPS / "iteration.json"  # exists from the seed's start to the verdict: an iteration to undo
LOCK = BACKUPS / "supervisor.lock"
QUOTA = BACKUPS / "quota.json"          # the gateway's memory: spent or gone models, each model's last minute
WORK = ROOT / ".seed" / "work"          # the working copy, where the model's code runs (see terrarium.py)
SCRATCH = ROOT / ".seed" / "tmp"        # its private temporary folder, emptied before each run
JUDGED = ROOT / ".seed" / "judged"      # the candidate as the gate judges it: laid out by the keeper, read-only
LANDING = BACKUPS / "landing.json"      # exists only while a change is being copied into the folder
SETTLING = BACKUPS / "settling.json"    # exists from a landing's start until its row is in the record
SUSPICION = BACKUPS / "suspicion.json"  # what the loop suspects of the world, kept across restarts
DEMO = ROOT / "supervisor" / "demo.json"  # the offline demo's goal and scripted answers
LOG = ROOT / "iteration_log.md"
LOGS_ASIDE = BACKUPS / "logs"          # iteration_log.md set aside each time it grows past SEED_LOG_MB
TASKS = ROOT / "pending_tasks.md"
CONTRACT = "supervisor/tests/test_seed.py"  # the seed's contract: run by the gate when the seed changed
TEST_SUPPORT = ["supervisor/tests/conftest.py", "supervisor/tests/fake_gemini.py"]  # what the contract needs
KEEPER = ["fallback.py", "supervisor/", "bench/", "docs/", "backups/", "README.md", "requirements.txt"]  # the keeper's
STEERING = ["goal.md", "pending_tasks.md"]  # the user's to edit at any time: never snapshotted or restored
PERSONS = [*STEERING, "evaluate.py", "iteration_log.md", "report.html", "compare.html"]  # the person's: not the model's
NOT_YOURS = [*KEEPER, *PERSONS]  # what the model may not write, besides any name that starts with "."; said in a line
GUARDED = [rel for rel in NOT_YOURS if not rel.endswith("/")]  # files that are never the codebase's, by any case
CACHES = {"__pycache__", "node_modules", "venv"}  # folders a run or a person's tools make: not the codebase
NOT_CODE = {rel.rstrip("/") for rel in NOT_YOURS if rel.endswith("/")} | CACHES  # folders that are not the codebase
NAMED = {}  # what the command line named for one run: {"goal.md": --goal's path, "--model": --model's names}
FULL_GATE_EVERY = number("SEED_FULL_GATE_EVERY", 10, 1)  # landings on a selection of the tests before all run again
PARALLEL_FROM = number("SEED_PARALLEL_FROM", 40, 1)  # test files from which a gate runs them in two processes
# at once, on two cores or more (a failure there is confirmed by running them all in one)
GATE_TIMEOUT = number("SEED_GATE_SECONDS", 300, 2)  # seconds the gate's tests may take in one process
LIMITS = {              # on the seed and the gate's children; a run that hits one fails like a crash
    "RLIMIT_AS": number("SEED_MEMORY_MB", 4096, 1) << 20,    # memory (address space)
    "RLIMIT_CPU": number("SEED_CPU_SECONDS", 600, 1),         # CPU seconds
    "RLIMIT_FSIZE": number("SEED_FILE_MB", 64, 1) << 20,     # the largest file it may write
    "RLIMIT_NOFILE": number("SEED_OPEN_FILES", 1024, 16),      # open files
}
WORK_FILES = number("SEED_WORK_FILES", 20_000, 100)  # files and folders a run may leave in the working copy
WORK_BYTES = number("SEED_WORK_MB", 512, 1) << 20      # and their bytes
LANDING_FILES = number("SEED_LANDING_FILES", 5_000, 1)  # files one landing may change
LANDING_BYTES = number("SEED_LANDING_MB", 32, 1) << 20  # new bytes one run may write (what would land)
PROCESSES = number("SEED_PROCESSES", 300, 16)  # processes a run may have at once; more fail to start
SHM_BYTES = number("SEED_SHM_MB", 64, 1) << 20   # what a run may keep in /dev/shm (its own, where namespaces work)
NAMESPACES = number("SEED_NAMESPACES", 1, 0) > 0  # 0: no namespaces of its own for a run, even where they work
ZYGOTE = number("SEED_ZYGOTE", 200, 0)  # runs (checks, the seed's) one preloaded process serves before a new one; 0:
# each run starts its own interpreters (zygote.py)
KEEP_LAST = number("BACKUPS_KEEP", 100, 1)  # snapshots kept besides genesis, one a day, known good
KEEP_GOOD = max(3, KEEP_LAST // 10)     # the newest known-good snapshots always kept: the walk-back's steps
KEEP_LANDED_DAYS = number("SEED_KEEP_LANDED_DAYS", 1, 0)  # every landing is kept this many days
KEEP_DAILY_DAYS = number("SEED_KEEP_DAILY_DAYS", 30, 0)   # then the newest of each day, this long; then one a week
BACKUPS_BYTES = number("SEED_BACKUPS_MB", 2048, 1) << 20  # what the snapshots kept by age may take in backups/
LOG_SHOWN = 65_536  # bytes of the end of iteration_log.md the working copy holds (the seed shows less)
LOG_BYTES = number("SEED_LOG_MB", 16, 1) << 20  # iteration_log.md past this is set aside in backups/logs/
LOGS_KEPT = 4  # logs set aside that are kept (the record holds every iteration: python fallback.py --show N)
PROMPT_TOKENS = number("SEED_PROMPT_TOKENS", 60_000, 1_000)  # the largest prompt, in estimated tokens
SANDBOX_REQUIRED = os.environ.get("SEED_SANDBOX", "").strip() == "require"  # refuse to run the model's code unconfined
if not SANDBOX_REQUIRED and os.environ.get("SEED_SANDBOX", "").strip():
    PROBLEMS.append(f"SEED_SANDBOX={os.environ['SEED_SANDBOX']!r}: the one value it takes is  require  (or leave it "
                    "unset for the best confinement this machine has)")
REQUESTS_PER_RUN = number("SEED_REQUESTS_PER_RUN", 1, 1)  # a rewritten seed cannot spend the day
BACKOFF = number("SEED_BACKOFF", 2.0, 0, float)  # seconds before the gateway's first retry after a 5xx
FAULT_PAUSE = number("SEED_FAULT_PAUSE", 300.0, 0, float)  # first wait after a fault from outside the code
MAX_FAILURE_TASKS = 10  # open failure tasks kept in pending_tasks.md; a person's tasks are never dropped
DRY_SPELL = 10          # iterations in a row that land nothing (waits aside) before it is called a stall
OUTPUT_TAIL = 64_000    # bytes of a child's output kept; the rest is read and dropped
TASK_LINES = 12         # lines of output copied into a failure task
EX_UNAVAILABLE, EX_CONFIG = 75, 78
KEY_SHAPES = re.compile(r"AIza[0-9A-Za-z_\-]{35}|AQ\.[0-9A-Za-z_\-.]{16,}")  # Google API keys, old and new
SECRET_NAMES = set(os.environ.get("SEED_SECRETS", "").replace(",", " ").split())  # .env settings whose values are
# secrets besides those whose names hold KEY, TOKEN, SECRET or PASSWORD (see scrub.py)


def dot_names(text):
    """The names starting with "." that SEED_DOT_NAMES lets be the codebase's (say .gitignore), at any depth; never
    git's own folder, .env and its kin, nor the keeper's .seed, whatever it says (each such name is a problem)."""
    names = set(text.replace(",", " ").split())
    wrong = sorted(name for name in names if not re.fullmatch(r"\.[^/\\]+", name) or name in (".", "..") or
                   name.rstrip(". ").casefold() in (".git", ".seed") or name.casefold().startswith(".env"))
    if wrong:
        PROBLEMS.append(f"SEED_DOT_NAMES holds {', '.join(map(repr, wrong))}: it names files or folders that start "
                        "with \".\" (such as .gitignore), one name each; never .git, .env or .seed")
    return frozenset(names - set(wrong))


DOT_NAMES = dot_names(os.environ.get("SEED_DOT_NAMES", ""))


def keeper_code(root=ROOT):
    """The keeper's Python files under supervisor/ (its rooms and their subpackages; its tests aside), sorted."""
    return sorted(path for path in (root / "supervisor").rglob("*.py")
                  if path.relative_to(root / "supervisor").parts[0] not in ("tests", "__pycache__"))


def source_of(rel):
    """Where a steering file is read from: the file named on the command line for this run, else the folder's."""
    return NAMED.get(rel, ROOT / rel)


def guard(rel):
    """A file of the folder named as this run's goal (--goal FILE) made the person's, as goal.md is: never the
    codebase's (not snapshotted, shown as code, written by a run or landed)."""
    for names in (PERSONS, NOT_YOURS, GUARDED):
        if rel not in names:
            names.append(rel)


def write_atomically(path, data):
    """Write a file whole or not at all: a temporary file under a fresh name of its own length (made with O_EXCL, so
    nothing left under that name is written through), then os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{secrets.token_hex(8)}.tmp")  # never longer for a longer name: a name the
    # folder can hold, the keeper can write
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def tail_of(path, size):
    """The last `size` bytes of a file (b"" when there is none), read from there: a log of years costs the same."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - size))
            return file.read()
    except FileNotFoundError:
        return b""


def save_json(path, value):
    """Write a JSON file atomically."""
    write_atomically(Path(path), json.dumps(value, indent=1, default=str))


def load_json(path):
    """A JSON object from a file, or {} when it is missing or unreadable."""
    try:
        value = json.loads(Path(path).read_text())
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def utc_now():
    """Now, the one kind of time the keeper works with: an aware datetime in UTC."""
    return datetime.now(timezone.utc)


def stamp(moment):
    """A time as the keeper writes it in its files and the record: "2026-11-25 18:00:00 UTC"."""
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def read_stamp(text):
    """A time the keeper wrote (stamp), as a datetime; None when it is not one."""
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=timezone.utc)
    except (AttributeError, ValueError):
        return None
