"""The tiny project root of the stage smoke tests, for the interrupt and resume tests."""
from tests.flows.conftest import tiny_root  # noqa: F401
