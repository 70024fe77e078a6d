import torch

from components.models.lm import LMConfig, LSTMLM


def test_lm_learns_and_ranks_frequent_sequences_as_less_perplexing():
    torch.manual_seed(0)
    frequent = torch.tensor([[1, 2, 3, 4]])
    rare = torch.tensor([[4, 1, 1, 2]])
    data = torch.cat([frequent.repeat(15, 1), rare])
    mask = torch.ones_like(data, dtype=torch.bool)
    lm = LSTMLM(5, LMConfig(dim=8, hidden=16, dropout=0.0))
    opt = torch.optim.Adam(lm.parameters(), lr=0.05)
    before = lm.perplexity(frequent, mask[:1]).item()
    for _ in range(60):
        opt.zero_grad()
        lm.train()
        lm.loss(data, mask).backward()
        opt.step()
    after_f = lm.perplexity(frequent, mask[:1]).item()
    after_r = lm.perplexity(rare, mask[:1]).item()
    assert after_f < before / 2 and after_f < after_r


def test_ragged_lengths_ignore_padding():
    torch.manual_seed(0)
    lm = LSTMLM(6, LMConfig(dim=4, hidden=8, dropout=0.0))
    ids = torch.tensor([[1, 2, 0, 0], [1, 2, 5, 5]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    nll, n = lm.token_nll(ids, mask)
    assert n.tolist() == [3, 5]
    nll_alone, _ = lm.token_nll(ids[:1, :2], mask[:1, :2])
    torch.testing.assert_close(nll[0], nll_alone[0])
