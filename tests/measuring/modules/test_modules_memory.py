"""Per-module memory from torch's MemTracker against known sizes."""
import torch

from sbprof.measuring.modules.memory import module_memory

MiB = 2 ** 20


class Keeps(torch.nn.Module):
    """Saves a known activation for backward: 4 MiB kept from its forward to its backward."""

    def forward(self, x):
        big = x.repeat(1, 1024)  # (64, 16 * 1024) float32 = 4 MiB, saved by the product below
        return (big * big).sum(dim=1, keepdim=True)


def test_parameters_outputs_and_a_known_activation():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), Keeps())
    x = torch.randn(64, 16)
    rows, peak = module_memory(model, lambda: model(x).sum().backward(), ["0", "1"])
    assert rows["0"]["params_bytes"] == (16 * 16 + 16) * 4
    assert rows["0"]["output_bytes"] == 64 * 16 * 4
    assert rows["1"]["params_bytes"] == 0 and rows["1"]["output_bytes"] == 64 * 4
    # the 4 MiB activation (plus its square, freed after the sum) is added during Keeps' forward
    assert 4 * MiB <= rows["1"]["forward_added_bytes"] <= 8 * MiB + MiB
    assert rows["1"]["backward_peak_bytes"] >= 4 * MiB
    assert peak["Parameter"] == (16 * 16 + 16) * 4 and peak["Total"] >= 4 * MiB


def test_optimiser_state_is_its_own_category():
    model = torch.nn.Linear(512, 512)
    opt = torch.optim.Adam(model.parameters())

    def step():
        model(torch.randn(4, 512)).sum().backward()
        opt.step()

    step()  # Adam makes its state on the first step
    _, peak = module_memory(torch.nn.Sequential(model), step, [], optimizers=[opt])
    assert peak["Optstate"] >= 2 * (512 * 512 + 512) * 4
