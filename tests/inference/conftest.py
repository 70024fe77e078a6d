import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here uses tiny tensors: pin torch to one thread (see tests/conftest.py)."""
    yield
