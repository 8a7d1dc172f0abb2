"""Shared fixtures: a fake Gemini server, a fresh copy of the workspace, and an environment pointing at both."""
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from fake_gemini import FakeGemini

REPO = Path(__file__).resolve().parent.parent
KEY = "AIzaSyTEST" + uuid.uuid4().hex[:29]  # made per session, so no file holds it unless it leaked
WORKSPACE_FILES = ["seed.py", "fallback.py", "goal.md", "pending_tasks.md", "iteration_log.md", ".env.example",
                   "tests/conftest.py", "tests/fake_gemini.py"]


@pytest.fixture
def gemini():
    fake = FakeGemini()
    yield fake
    fake.close()


@pytest.fixture
def workspace(tmp_path):
    """A copy of the product as a user's clone has it (without the project's own tests, to keep the gate fast)."""
    root = tmp_path / "workspace"
    for rel in WORKSPACE_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    return root


@pytest.fixture
def env(gemini):
    """The environment of a user with a key, pointed at the fake server; nothing inherited from this shell."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_"))}
    clean.update(GEMINI_API_KEY=KEY, GEMINI_API_BASE=gemini.url, GEMINI_MODEL="gemini-3.5-flash",
                 GEMINI_RPM="0", SEED_BACKOFF="0.01", PYTHONDONTWRITEBYTECODE="1")
    return clean


def run_seed(root, env, timeout=60):
    return subprocess.run([sys.executable, "seed.py"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)
