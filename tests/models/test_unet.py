import pytest
import torch

from components.models.unet import UNet, UNetConfig


@pytest.mark.parametrize("hw", [(10, 10), (16, 16), (7, 11), (1, 1)])
@pytest.mark.parametrize("depth", [0, 2])
def test_output_shape(hw, depth):
    net = UNet(3, 5, UNetConfig(depth=depth, width=4))
    out = net(torch.rand(2, 3, *hw))
    assert out.shape == (2, 5, *hw)
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_structure_and_bad_input():
    net = UNet(3, 8, UNetConfig(depth=2, width=16))
    assert len(net.down) == 3 and len(net.up) == 2
    assert [b[0].out_channels for b in net.down] == [16, 32, 64]
    assert net.head.kernel_size == (1, 1) and net.head.out_channels == 8
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in UNet(3, 2, UNetConfig(batch_norm=False)).modules())
    with pytest.raises(ValueError, match=r"\[B, 3, H, W\]"):
        net(torch.rand(2, 4, 8, 8))
