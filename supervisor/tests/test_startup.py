"""Nothing of the folder runs in the keeper, or in a process it starts, before it is confined: `python fallback.py`
against the fake Gemini, with modules of the standard library's names planted in the folder and an environment whose
values point back at it.

Each attack is kept beside the rule it tries: the keeper's own start-up (its path fixed before any import, `-S`
included), the environment a run gets (names and values), and the landing rule that refuses a module a name Python
already has (which a start-up hook such as sitecustomize.py needs, since Python loads it before any line of ours).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_fallback import outcomes, run_fallback

PLANTED = "raise SystemExit('PLANTED {name}.py RAN')\n"  # what a module of the folder does if anything imports it
STANDARD_NAMES = ["signal", "fcntl", "json", "importlib", "collections", "pathlib", "datetime", "time", "re"]


def plant(root, names):
    for name in names:
        (root / f"{name}.py").write_text(PLANTED.format(name=name))


def ran(done):
    return [line for line in (done.stdout + done.stderr).splitlines() if "PLANTED" in line]


@pytest.mark.parametrize("flags", [[], ["-S"]], ids=["python", "python -S"])
def test_a_standard_modules_name_in_the_folder_never_runs_in_the_keeper(workspace, env, flags):
    """Under -S, os itself is not loaded yet when fallback.py's first line runs: it is looked up on the path (and
    site-packages is not on it: the keeper says the packages are missing, having imported nothing of the folder)."""
    plant(workspace, STANDARD_NAMES + (["os"] if flags else []))
    env.update(PYTHONPATH=":")  # an empty entry: "the folder the process stands in"
    done = subprocess.run([sys.executable, *flags, "fallback.py", "--status"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    assert not ran(done) and done.returncode == (78 if flags else 0), done.stdout[-1500:] + done.stderr[-1500:]
    assert "Traceback" not in done.stderr and ("missing Python packages" in done.stderr) == bool(flags)


def test_a_run_with_a_standard_modules_name_in_the_folder_and_an_empty_path_entry_loads_nothing_of_it(
        workspace, env, gemini):
    """The seed, the gate's launcher and its check program, and the keeper each start with PYTHONPATH=":" and
    LD_LIBRARY_PATH=":" inherited: none of them imports the folder's json.py or signal.py."""
    plant(workspace, ["json", "signal"])
    env.update(PYTHONPATH=":", LD_LIBRARY_PATH=":")
    gemini.reply(api.answer([("other.py", "x = 3\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert not ran(done) and done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert "PLANTED" not in (workspace / "iteration_log.md").read_text()


def test_a_run_gets_the_environments_names_and_values_it_allows_and_no_other(workspace, env, gemini):
    """The attack: values that point back at the folder (empty and relative entries), start-up hooks of Python's,
    the dynamic linker's, and a value of an allowed name in a shape it never has."""
    seed = (workspace / "seed.py").read_text()
    (workspace / "seed.py").write_text(seed.replace("def main():\n", "def main():\n    import os, json, pathlib\n"
                                                    "    pathlib.Path('env.json').write_text(json.dumps(dict(os.environ)))\n",
                                                    1))
    env.update(PYTHONPATH=":/opt/lib", LD_LIBRARY_PATH=":", LD_PRELOAD="libevil.so", PYTHONSTARTUP="evil.py",
               TERM="xterm; curl evil", LANG="C.UTF-8", TZ="Europe/Paris",
               PATH=":.:bin:" + env["PATH"])
    gemini.reply(api.answer([("other.py", "x = 3\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    seen = json.loads((workspace / "env.json").read_text())
    assert not {"PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONSTARTUP", "TERM"} & set(seen)
    assert seen["LANG"] == "C.UTF-8" and seen["TZ"] == "Europe/Paris"
    entries = seen["PATH"].split(os.pathsep)
    assert all(os.path.isabs(entry) for entry in entries), entries
    assert os.path.dirname(sys.executable) == entries[0]
    assert not any(entry == str(workspace) or entry.startswith(f"{workspace}/") for entry in entries[1:])


def test_a_module_that_takes_a_name_python_has_never_lands_and_says_why(workspace, env, gemini):
    """signal.py would stand in for the standard library's wherever the folder is first on the path; sitecustomize.py
    runs at every start of a Python whose PYTHONPATH has an empty entry; requests/ is an installed package's; org/ is
    a name the standard library looks for and does not find (copy.py tries Jython's org.python.core: the red team's
    module of that name ran in the scorer and forged the score, and read .env in a person's python -m http.server)."""
    taken = ("signal.py", "sitecustomize.py", "requests/__init__.py", "org/python/core.py")
    for rel in taken:
        gemini.reply(api.answer([(rel, "x = 1\n")]))
    gemini.reply(api.answer([("my_signals.py", "x = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", str(len(taken) + 1))
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    seen = outcomes(workspace)
    assert [outcome.split(": ")[:2] for outcome in seen] == [["rolled back", "a module takes a name Python has"]] * \
        len(taken) + [["landed", "1 file(s) changed"]], seen
    tasks = (workspace / "pending_tasks.md").read_text()
    for told in ("signal.py (signal: the standard library)", "sitecustomize.py (sitecustomize: a start-up hook",
                 "requests/__init__.py (requests: the installed package requests)", "Give it a name of its own",
                 "org/python/core.py (org: a name the standard library or an installed package imports)"):
        assert told in tasks, tasks
    assert not any((workspace / rel).exists() for rel in ("signal.py", "sitecustomize.py", "requests", "org"))


def test_the_names_python_has_are_kept_per_interpreter_and_packages_as_installed_and_never_lose_the_standard_ones(
        tmp_path, monkeypatch):
    """Worked out once (half a second) and kept in the user's cache; a damaged file is worked out again; a package
    installed again at the same version with another module is another key; and the standard library's names and
    the start-up hooks are never the file's, so an empty one written by code run unconfined loses none of them."""
    gate = load_keeper("gate")
    site = tmp_path / "site"
    (site / "mypkg-1.0.dist-info").mkdir(parents=True)
    (site / "mypkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 1.0\n")
    (site / "mypkg-1.0.dist-info" / "top_level.txt").write_text("foo\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(site))

    def names():
        gate.python_names.cache_clear()
        return gate.python_names()
    first = names()
    kept = next((tmp_path / "cache" / "seed").glob("python-owners-*.json"))
    assert first["foo"] == "the installed package mypkg" and first["json"] == "the standard library"
    assert first["requests"] == "the installed package requests" and first["org"].startswith("a name the standard")
    assert "the standard library" not in json.loads(kept.read_text()).values() and names() == first  # read back
    for damaged in ("[1, 2]", '{"foo": 1}', "{not json"):
        kept.write_text(damaged)
        assert names() == first and "foo" in json.loads(kept.read_text())
    kept.write_text("{}")  # what code run without Landlock could leave there
    assert {"json", "signal", "sitecustomize"} <= set(names()) and "foo" not in names()
    shutil.rmtree(site / "mypkg-1.0.dist-info")  # installed again, at the same version, with a module more
    (site / "mypkg-1.0.dist-info").mkdir()
    (site / "mypkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 1.0\n")
    (site / "mypkg-1.0.dist-info" / "top_level.txt").write_text("foo\nbar\n")
    os.utime(site / "mypkg-1.0.dist-info", ns=(1, 1))  # installed at another moment, whatever the clock's grain
    assert names()["bar"] == "the installed package mypkg"
    gate.python_names.cache_clear()
