"""``gradcheck``'s mismatch report prints the Jacobians as PyTorch does: a row
per input element and a column per output element, in the input's dtype."""
import pytest

import tape


class _Wrong(tape.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3


def _report(L, fn, x):
    with pytest.raises(RuntimeError, match="Jacobian mismatch") as e:
        L.autograd.gradcheck(fn, (x,))
    text = str(e.value)
    return text[text.index('numerical:'):].replace('torch.', 'tape.')


def test_mismatch_report_layout_matches_torch():
    torch = pytest.importorskip('torch')

    class TWrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    xt = torch.tensor([1., 2., 3.], dtype=torch.float64, requires_grad=True)
    xo = tape.tensor([1., 2., 3.], dtype=tape.float64, requires_grad=True)
    assert _report(tape, _Wrong.apply, xo) == _report(torch, TWrong.apply, xt)
    # a scalar output of three inputs: a (3, 1) Jacobian, as torch's
    ours = _report(tape, lambda a: _Wrong.apply(a).sum(), xo)
    theirs = _report(torch, lambda a: TWrong.apply(a).sum(), xt)
    assert ours == theirs and ours.count('\n') >= 6
    assert not tape.autograd.gradcheck(_Wrong.apply, (xo,), raise_exception=False)
