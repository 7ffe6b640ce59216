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


def model_path(name: str) -> str:
    path = os.path.join(MODELS, name)
    if not os.path.exists(path):
        pytest.skip(f"fixture {path} is missing")
    return path


@pytest.fixture(scope="session")
def sdk():
    from specula_train import sdk as s
    try:
        s.lib()
    except FileNotFoundError as e:  # the SDK is built before these tests in .ci/run; say so loudly otherwise
        pytest.fail(str(e))
    return s
