import pytest

from flows.parallel import ResourcesConfig, shards, sharded_map


def _square_sum(args):
    start, stop = args
    return sum(i * i for i in range(start, stop))


def _fail(args):
    raise ValueError("boom")


def test_shards_cover_the_range():
    assert shards(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shards(0, 3) == []
    with pytest.raises(ValueError, match="shard_size"):
        shards(5, 0)


def test_sharded_map_returns_results_in_shard_order_and_names_failures():
    import ray
    try:
        parts = sharded_map(_square_sum, shards(50, 7), resources=ResourcesConfig(cpu=1, gpu=0), desc="test")
        assert sum(parts) == sum(i * i for i in range(50))
        assert parts[0] == _square_sum((0, 7))
        with pytest.raises(RuntimeError, match="shard 0 failed"):
            sharded_map(_fail, [(0, 1)], resources=ResourcesConfig(cpu=1, gpu=0), desc="test")
    finally:
        ray.shutdown()
