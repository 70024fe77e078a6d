import numpy as np
import pytest
import torch
from PIL import Image

from components.data import store
from components.data.grids import grid_tensors, padded_grid_tensors, read_grids, write_grids
from components.data.readers import read_weizmann_horses
from components.data.types import FormatError, GridExample


def _grids(rng, shapes):
    return [GridExample(x=rng.integers(0, 256, (h, w, 3)).astype(np.uint8), y=rng.integers(0, 11, (h, w)))
            for h, w in shapes]


def test_grids_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    grids = _grids(rng, [(3, 4), (2, 5)])
    path = tmp_path / "g.parquet"
    n = store.write_table(path, {
        "index": [1, 0], "height": [2, 3], "width": [5, 4], "channels": [3, 3],
        "x": [grids[1].x.reshape(-1).tolist(), grids[0].x.reshape(-1).tolist()],
        "y": [grids[1].y.astype(np.int8).reshape(-1).tolist(), grids[0].y.astype(np.int8).reshape(-1).tolist()]},
        store.GRID)
    assert n == 2
    back = read_grids(path)                              # in index order
    for a, b in zip(back, grids):
        assert a.x.dtype == np.uint8 and a.y.dtype == np.int64
        np.testing.assert_array_equal(a.x, b.x)
        np.testing.assert_array_equal(a.y, b.y)
    write_grids(tmp_path / "h.parquet", grids)
    for a, b in zip(read_grids(tmp_path / "h.parquet"), grids):
        np.testing.assert_array_equal(a.x, b.x)


def test_read_grids_bad_row_names_file(tmp_path):
    path = tmp_path / "bad.parquet"
    store.write_table(path, {"index": [7], "height": [2], "width": [2], "channels": [3],
                             "x": [[0] * 11], "y": [[0] * 4]}, store.GRID)
    with pytest.raises(ValueError, match=r"bad.parquet: grid index 7"):
        read_grids(path)


def test_grid_tensors_and_padding():
    rng = np.random.default_rng(1)
    grids = _grids(rng, [(3, 4), (3, 4)])
    x, y = grid_tensors(grids)
    assert x.shape == (2, 3, 3, 4) and x.dtype == torch.float32 and y.shape == (2, 3, 4) and y.dtype == torch.long
    assert 0 <= x.min() and x.max() <= 1
    torch.testing.assert_close(x[1, :, 2, 3], torch.tensor(grids[1].x[2, 3] / 255.0, dtype=torch.float32))
    ragged = _grids(rng, [(3, 4), (2, 5)])
    with pytest.raises(ValueError, match=r"example 1 has x \[2, 5, 3\]"):
        grid_tensors(ragged)
    x, y, mask = padded_grid_tensors(ragged)
    assert x.shape == (2, 3, 3, 5) and mask.sum().item() == 12 + 10
    assert bool((x[0, :, :, 4] == 0).all()) and not mask[0, :, 4].any()
    assert torch.equal(y[1, :2, :5], torch.as_tensor(ragged[1].y))
    with pytest.raises(ValueError, match="larger than"):
        padded_grid_tensors(ragged, size=(2, 5))


def _horses(root, n=2, size=(12, 9)):
    db = root / "weizmann_horse_db"
    (db / "rgb").mkdir(parents=True)
    (db / "figure_ground").mkdir()
    rng = np.random.default_rng(2)
    for i in range(1, n + 1):
        W, H = size
        Image.fromarray(rng.integers(0, 256, (H, W, 3)).astype(np.uint8)).save(db / "rgb" / f"horse{i:03d}.jpg")
        m = np.zeros((H, W), np.uint8)
        m[H // 2:, :] = 255
        Image.fromarray(m).save(db / "figure_ground" / f"horse{i:03d}.png")
    return db


def test_weizmann_horses(tmp_path):
    db = _horses(tmp_path)
    out = read_weizmann_horses(tmp_path, size=(6, 4))
    assert len(out) == 2
    assert out[0].x.shape == (6, 4, 3) and out[0].x.dtype == np.uint8
    assert set(np.unique(out[0].y)) == {0, 1} and out[0].y[0].sum() == 0 and out[0].y[-1].all()
    assert len(read_weizmann_horses(db, size=(6, 4))) == 2      # the db folder itself works too
    (db / "figure_ground" / "horse002.png").unlink()
    with pytest.raises(FormatError, match=r"horse002\.jpg: image without a mask"):
        read_weizmann_horses(tmp_path)


def test_weizmann_horses_bad_files(tmp_path):
    db = _horses(tmp_path)
    Image.fromarray(np.zeros((5, 5), np.uint8)).save(db / "figure_ground" / "horse001.png")
    with pytest.raises(FormatError, match=r"horse001\.png: mask is 5x5"):
        read_weizmann_horses(tmp_path)
    (db / "rgb" / "horse001.jpg").write_bytes(b"not an image")
    with pytest.raises(FormatError, match=r"horse001\.jpg: not a readable image"):
        read_weizmann_horses(tmp_path)
    with pytest.raises(FormatError, match="folder not found"):
        read_weizmann_horses(tmp_path / "nowhere")
