"""The terrarium end to end, through `python fallback.py`: the model's code runs in a working copy, confined.

A rewritten seed and a module the gate runs try to reach what careless code must not: the user's folder, the
home folder, /tmp, .env, another loopback port, the supervisor itself. Each attempt fails, the loop goes on,
nothing outside changes, and the log says what the system refused. Skipped where the kernel has no Landlock.
"""
import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_fallback import outcomes, run_fallback

sandbox = load_keeper("sandbox")
SUPPORT = sandbox.probe()
needs_landlock = pytest.mark.skipif(SUPPORT.abi < 6, reason=f"needs Landlock ABI 6 or newer: {SUPPORT.text}")
ATTEMPTS = '''import os, pathlib, signal, socket, sys


def attempts(home, outside_tmp, port):
    """Every way out careless code might take, each with what the system said."""
    folder = pathlib.Path.cwd().parent.parent  # the user's folder, above .seed/work
    tries = {
        "write the user's folder": lambda: (folder / "owned.txt").write_text("x"),
        "write the home folder": lambda: (pathlib.Path(home) / "owned.txt").write_text("x"),
        "write /tmp": lambda: pathlib.Path(outside_tmp).write_text("x"),
        "read .env": lambda: (folder / ".env").read_text(),
        "read the home folder": lambda: (pathlib.Path(home) / "secret.txt").read_text(),
        "connect to another port": lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close(),
        "signal the supervisor": lambda: os.kill(os.getppid(), signal.SIGTERM),  # the supervisor started it
    }
    said = {}
    for what, attempt in tries.items():
        try:
            attempt()
            said[what] = "ALLOWED"
        except OSError as error:
            said[what] = f"{type(error).__name__}: {error}"
    return said
'''


@pytest.fixture
def outside(tmp_path):
    """A home with a secret, a path in /tmp, a loopback server that is not the gateway, and .env with the key."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text("the user's secret\n")
    server = listen_below_the_ephemeral_range()  # where services live (a gate's own servers get ephemeral ports)
    tmp = Path(f"/tmp/seed-escape-{uuid.uuid4().hex}")
    yield {"home": home, "tmp": tmp, "server": server}
    server.close()
    tmp.unlink(missing_ok=True)


def listen_below_the_ephemeral_range():
    for port in range(21000, 32000, 97):
        try:
            return socket.create_server(("127.0.0.1", port))
        except OSError:
            continue
    pytest.skip("no free port below the ephemeral range")


def call_attempts(outside):
    """The call, with the places written in: the run's environment holds none of the test's variables."""
    where = f"{str(outside['home'])!r}, {str(outside['tmp'])!r}, {outside['server'].getsockname()[1]}"
    return f"    import attempts, json, os\n    said = attempts.attempts({where})\n"


def nothing_changed_outside(workspace, outside, before):
    assert not (workspace / "owned.txt").exists() and not (outside["home"] / "owned.txt").exists()
    assert not outside["tmp"].exists()
    assert (outside["home"] / "secret.txt").read_text() == "the user's secret\n"
    assert {p: p.read_bytes() for p in workspace.iterdir() if p.is_file() and p.suffix != ".md"
            and p.name != "report.html"} == before


@needs_landlock
def test_a_rewritten_seed_reaches_nothing_outside_its_working_copy(workspace, env, gemini, outside):
    (workspace / ".env").write_text("GEMINI_API_KEY=" + env["GEMINI_API_KEY"] + "\n")
    (workspace / "attempts.py").write_text(ATTEMPTS)
    (workspace / "seed.py").write_text("import sys\n\n\ndef main():\n" + call_attempts(outside) +
                                       "    for what, said_ in said.items():\n        print(what, '->', said_)\n"
                                       "    sys.exit(3)\n\n\nif __name__ == '__main__':\n    main()\n")
    before = {p: p.read_bytes() for p in workspace.iterdir() if p.is_file() and p.suffix != ".md"}
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr  # still running: the signal never reached it
    log = (workspace / "iteration_log.md").read_text()
    assert outcomes(workspace) == ["rolled back: seed.py crashed (exit 3)"] and "ALLOWED" not in log
    for what in ("write the user's folder", "write the home folder", "write /tmp", "read .env",
                 "read the home folder", "connect to another port", "signal the supervisor"):
        assert re.search(rf"{what} -> (PermissionError|OSError)", log), what
    assert "- Refused by the system: " in log and "Permission denied" in log
    nothing_changed_outside(workspace, outside, before)


@needs_landlock
def test_a_module_the_gate_runs_reaches_nothing_either_and_its_own_server_works(workspace, env, gemini, outside):
    test = ("import http.server, threading, urllib.request\nimport attempts, os\n\n\ndef test_nothing_outside():\n"
            + call_attempts(outside).replace("    import attempts, json, os\n", "") +
            "    assert all(said_ != 'ALLOWED' for said_ in said.values()), said\n\n\n"
            "def test_a_server_of_its_own():\n    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), "
            "http.server.SimpleHTTPRequestHandler)\n    threading.Thread(target=server.serve_forever, daemon=True)"
            ".start()\n    port = server.server_address[1]\n    assert urllib.request.urlopen(f'http://127.0.0.1:"
            "{port}/', timeout=5).status == 200\n    server.shutdown()\n")
    gemini.reply(api.answer([("attempts.py", ATTEMPTS), ("tests/test_attempts.py", test)]))
    (workspace / ".env").write_text("GEMINI_API_KEY=" + env["GEMINI_API_KEY"] + "\n")
    before = {p: p.read_bytes() for p in workspace.iterdir() if p.is_file() and p.suffix != ".md"}
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed"]  # its tests found every way out shut
    assert "- Confinement: Landlock ABI" in (workspace / "iteration_log.md").read_text()
    before.update({workspace / "attempts.py": ATTEMPTS.encode()})
    nothing_changed_outside(workspace, outside, before)


def test_a_change_that_fails_the_gate_leaves_the_folder_byte_identical(workspace, env, gemini):
    (workspace / "notes.py").write_text("NOTES = []\n")
    gemini.reply(api.answer([("notes.py", "NOTES = None\n"), ("extra.py", "x = 1\n"),
                             ("tests/test_notes.py", "import notes\n\n\ndef test_notes():\n    assert notes.NOTES == []\n")]))
    code = lambda: {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file() and not {"backups", ".seed"} &
                    set(p.relative_to(workspace).parts) and p.name not in ("iteration_log.md", "pending_tasks.md",
                                                                           "report.html")}
    before = code()
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["rolled back: tests failed"] and code() == before


def test_a_landing_cut_short_by_kill_9_is_finished_at_the_next_start(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n"), ("b.py", "b = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    objects = workspace / "backups" / "objects"
    sha = "".join(p.parent.name + p.name for p in objects.glob("*/*") if p.read_bytes() == b"a = 1\n")
    (workspace / "a.py").write_text("a = 0\n")  # half done: a.py not yet written, b.py not yet deleted
    (workspace / "backups" / "landing.json").write_text(json.dumps({"a.py": sha, "b.py": None}))
    gemini.reply(api.answer([("c.py", "c = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert "finished the landing of 2 file(s)" in done.stdout
    assert (workspace / "a.py").read_text() == "a = 1\n" and not (workspace / "b.py").exists()
    assert (workspace / "c.py").exists() and not (workspace / "backups" / "landing.json").exists()


def test_a_landing_killed_at_any_moment_leaves_the_folder_as_it_was_or_as_it_should_become(workspace, env, gemini):
    many = [(f"many/m{i}.py", f"N = {i}\n") for i in range(500)]
    gemini.reply(api.answer(many))
    supervisor = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0", "--iterations", "1"], cwd=workspace,
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    landing, first = workspace / "backups" / "landing.json", workspace / "many" / "m0.py"
    while supervisor.poll() is None and not (landing.exists() and first.exists()):  # its first file written, and
        pass  # the rest not yet
    supervisor.kill()
    supervisor.wait()
    gemini.reply(api.answer([("after.py", "x = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    landed = sorted(p.name for p in (workspace / "many").glob("*.py")) if (workspace / "many").exists() else []
    assert len(landed) in (0, 500) and (workspace / "after.py").exists()


def test_a_symlink_in_the_folder_is_no_way_out_when_a_change_lands(workspace, env, gemini, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "outside_link").symlink_to(outside)  # the working copy has no symlinks: the seed cannot see it
    gemini.reply(api.answer([("outside_link/evil.py", "x = 1\n"), ("inside.py", "y = 1\n")]))
    gemini.reply(api.answer([("outside_link/evil.py", "x = 2\n")]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert list(outside.iterdir()) == [] and (workspace / "inside.py").exists()
    assert outcomes(workspace) == ["landed: 1 file(s) changed",
                                   "no change: a symlink out of the folder, or a folder, stands where it would land"]
    assert "- Not landed (a symlink out of the folder, or a folder, stands there): outside_link/evil.py" in \
        (workspace / "iteration_log.md").read_text()
