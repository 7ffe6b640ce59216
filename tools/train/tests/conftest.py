import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.abspath(os.path.join(REPO, "..", "shared", "fixtures"))
MODELS = os.path.join(FIXTURES, "models")

torch.set_num_threads(min(2, os.cpu_count() or 1))


# Fixtures the repository bundles too (models/, with provenance in models/README.md): the same bytes, so a clone
# without ../shared still runs the tests that need only these.
BUNDLED = {"stories260K.gguf": os.path.join(REPO, "models", "stories260K.gguf")}


def model_path(name: str) -> str:
    path = os.path.join(MODELS, name)
    if not os.path.exists(path) and name in BUNDLED:
        path = BUNDLED[name]
    if not os.path.exists(path):
        pytest.skip(f"fixture {path} is missing")
    return path


def reference_path(name: str) -> str:
    """A llama.cpp reference output (../shared/fixtures/reference); the test is skipped when it is absent."""
    path = os.path.join(FIXTURES, "reference", name)
    if not os.path.exists(path):
        pytest.skip(f"fixture {path} is missing")
    return path


# Under ctest (SPECULA_SKIP_EXIT_CODE set, tests/CMakeLists.txt) a run that passed but skipped something for want
# of data exits with that code, which ctest reports as "Skipped" rather than passed, and each reason is printed as
# a "SKIPPED:" line for the list ctest prints after its summary (tests/report_skips.cmake).
_skips = []


def pytest_runtest_logreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        _skips.append(str(report.longrepr[2]).removeprefix("Skipped: "))


def pytest_sessionfinish(session, exitstatus):
    code = os.environ.get("SPECULA_SKIP_EXIT_CODE")
    if not code or not _skips:
        return
    for why in sorted(set(_skips)):  # one line per reason, with the number of pytest tests it skipped
        print(f"\nSKIPPED: {why} ({_skips.count(why)} pytest test(s))", end="")
    print()
    if exitstatus == 0:
        session.exitstatus = int(code)


@pytest.fixture(scope="session")
def sdk():
    from specula_train import sdk as s
    try:
        s.lib()
    except FileNotFoundError as e:  # the SDK is built before these tests in .ci/run; say so loudly otherwise
        pytest.fail(str(e))
    return s
