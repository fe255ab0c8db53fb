"""Forward wrapping: called around each forward, kwargs passed on, undone exactly, and no torch hooks used."""
import pytest
import torch

from sbprof.measuring.modules.wrapping import wrap_forward


def test_enter_and_leave_run_around_forward_and_undo_restores_the_class_method():
    calls = []
    lin = torch.nn.Linear(3, 2)
    w = wrap_forward(lin, lambda m, a: calls.append(("in", m, a[0].shape)),
                     lambda m, a, o: calls.append(("out", m, o.shape)))
    out = lin(torch.ones(4, 3))
    assert calls == [("in", lin, (4, 3)), ("out", lin, (4, 2))] and out.shape == (4, 2)
    assert not lin._forward_pre_hooks and not lin._forward_hooks  # no torch hook: no slow dispatch path
    w.undo()
    assert "forward" not in vars(lin) and lin.forward.__func__ is torch.nn.Linear.forward


def test_keyword_arguments_reach_forward_and_a_raising_forward_skips_leave():
    class Scale(torch.nn.Module):
        def forward(self, x, factor=1.0):
            if factor < 0:
                raise ValueError("negative")
            return x * factor

    left = []
    m = Scale()
    w = wrap_forward(m, lambda mod, a: None, lambda mod, a, o: left.append(o))
    assert m(torch.ones(2), factor=3.0).tolist() == [3.0, 3.0] and len(left) == 1
    with pytest.raises(ValueError):
        m(torch.ones(2), factor=-1.0)
    assert len(left) == 1
    w.undo()


def test_an_instance_forward_set_before_is_restored_and_one_set_after_is_left_alone():
    lin = torch.nn.Linear(2, 2)
    own = lin.forward
    lin.forward = own  # an instance-level forward (e.g. another tool's wrapper)
    w = wrap_forward(lin, lambda m, a: None, lambda m, a, o: None)
    w.undo()
    assert vars(lin)["forward"] is own
    w = wrap_forward(lin, lambda m, a: None, lambda m, a, o: None)
    later = lin.forward
    lin.forward = lambda x: later(x)  # someone wraps after us
    after = vars(lin)["forward"]
    w.undo()
    assert vars(lin)["forward"] is after  # theirs kept; ours, inside it, stays (callers make it inert)
