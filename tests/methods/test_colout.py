"""submission.methods.colout (Hot): the rows and columns it removes, as Composer v0.8.0's
seeded draw removes them."""
import torch

from submission.methods import colout


def test_colout_shapes_follow_composers_floor():
    x = torch.zeros(2, 3, 176, 176)
    assert colout.colout_batch(x, 0.05, 0.05).shape == (2, 3, 167, 167)
    assert colout.colout_batch(torch.zeros(1, 3, 88, 40), 0.05, 0.25).shape == (1, 3, 83, 30)
    assert colout.colout_batch(x, 0.0, 0.0).shape == x.shape


def test_colout_removes_the_same_seeded_rows_and_columns_from_every_image():
    n, c, h, w = 3, 2, 20, 24
    x = torch.arange(n * c * h * w, dtype=torch.float32).view(n, c, h, w)
    out = colout.colout_batch(x, 0.25, 0.25, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)          # Composer: rows, then columns, from randperm
    rows = sorted(torch.randperm(h, generator=g)[:15].tolist())
    cols = sorted(torch.randperm(w, generator=g)[:18].tolist())
    assert out.shape == (n, c, 15, 18)
    for i, r in enumerate(rows):
        for j, col in enumerate(cols):
            assert torch.equal(out[:, :, i, j], x[:, :, r, col])
    # the global generator by default, like Composer's torch.randperm
    torch.manual_seed(11)
    a = colout.colout_batch(x, 0.25, 0.25)
    torch.manual_seed(11)
    assert torch.equal(a, colout.colout_batch(x, 0.25, 0.25))
    # the removed rows: exactly the complement, and a different seed removes others
    removed = sorted(set(range(h)) - set(rows))
    assert len(removed) == 5
    other = colout.colout_batch(x, 0.25, 0.25, torch.Generator().manual_seed(6))
    assert not torch.equal(other, out)
