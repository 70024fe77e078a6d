import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny tensors: one intra-op thread is fastest; idle OpenMP workers spinning on a busy 2-core
    # machine cost 10-100x in wall time (one run of these tests took 258 s with two threads).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
