"""The suite's own footing: what its tests count on from pytest and pytest-xdist holds in the installed versions."""
import os
import subprocess
import sys

TEST = """import os, pytest, time
@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    time.sleep(0.05)
    with open("workers.txt", "a") as file:
        file.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
@pytest.mark.parametrize("n", range(6))
def test_free(n):
    time.sleep(0.05)
"""


def test_the_tests_of_one_xdist_group_run_in_one_worker(tmp_path):
    """Runs without namespaces of their own share /dev/shm and each takes away what it finds there (conftest's
    WITHOUT_NAMESPACES), and some files share one run of the keeper: their group must keep them in one worker. A
    pytest that loses the groups (9.2 with pytest-xdist 3.8) fails here, not as a flaky test elsewhere."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_groups.py").write_text(TEST)
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # not this worker's
    done = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p",
                           "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers
