"""A tour of tape: the PyTorch autograd tutorial, run on tape.

Run with ``make demo`` (or ``python examples/demo.py``).
"""
import time

import tape
from tape.autograd import Variable as V


def main():
    print('== graph and gradients ==')
    x = tape.ones(1)
    w = tape.tensor([0.5], requires_grad=True)
    b = tape.tensor([0.25], requires_grad=True)
    y = w * x
    z = y + b
    print('requires_grad x, w, b, y, z:', x.requires_grad, w.requires_grad, b.requires_grad,
          y.requires_grad, z.requires_grad)
    print('is_leaf x, w, y:', x.is_leaf, w.is_leaf, y.is_leaf)
    print('z.grad_fn:', z.grad_fn)
    z.backward(retain_graph=True)
    z.backward(retain_graph=True)
    print('after two backwards, w.grad =', w.grad, ' b.grad =', b.grad)
    w.grad.zero_()
    z.backward()
    print('after zeroing w.grad and one more: w.grad =', w.grad, ' b.grad =', b.grad)
    try:
        z.backward()
    except RuntimeError as e:
        print('a third backward without retain_graph:', str(e)[:60], '...')

    print('\n== f(x) = x**2 * exp(x) ==')
    x = V(tape.randn(3, 4), requires_grad=True)
    y = x ** 2 * tape.exp(x)
    y.backward(tape.ones(y.size()))
    manual = 2 * x.detach() * tape.exp(x.detach()) + x.detach() ** 2 * tape.exp(x.detach())
    print('max |autograd - manual| =', float((x.grad - manual).abs().sum()))

    print('\n== hooks, a custom Function, double backward ==')
    x = V(tape.ones(3), requires_grad=True)
    w = V(tape.tensor([0.5, 1.0, 2.0]), requires_grad=True)
    y = x * w
    handle = y.register_hook(lambda grad: print('  hook sees dz/dy =', grad))
    y.sum().backward()
    handle.remove()

    class Sigmoid(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = 1 / (1 + tape.exp(-x))
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            out, = ctx.saved_tensors
            return out * (1 - out) * grad_output

    x64 = tape.randn(3, 4, dtype=tape.float64, requires_grad=True)
    print('  gradcheck(Sigmoid):', tape.autograd.gradcheck(Sigmoid.apply, (x64,)))
    x = tape.tensor([5.0], requires_grad=True)
    gx, = tape.autograd.grad(x ** 2, x, create_graph=True)
    print('  d(x^2)/dx at 5 =', gx, ' second derivative =', tape.autograd.grad(gx, x)[0])
    d3 = tape.func.grad(tape.func.grad(tape.func.grad(lambda v: (v ** 4).sum())))
    print('  third derivative of x^4 at 2 (tape.func.grad thrice):', d3(tape.tensor(2.0)))

    print('\n== linear regression, 8000 steps of batch 8 ==')
    tape.manual_seed(1000)

    def get_fake_data(batch_size=8):
        x = tape.rand(batch_size, 1) * 20
        y = x * 2 + (1 + tape.randn(batch_size, 1)) * 3
        return x, y

    w = V(tape.rand(1, 1), requires_grad=True)
    b = V(tape.zeros(1, 1), requires_grad=True)
    lr = 0.001
    t0 = time.perf_counter()
    for ii in range(8000):
        x, y = get_fake_data()
        y_pred = x.mm(w) + b.expand_as(y)
        loss = 0.5 * (y_pred - y) ** 2
        loss = loss.sum()
        loss.backward()
        w.data.sub_(lr * w.grad.data)
        b.data.sub_(lr * b.grad.data)
        w.grad.data.zero_()
        b.grad.data.zero_()
    dt = time.perf_counter() - t0
    print(f'w = {w.item():.3f} (true 2), b = {b.item():.3f} (true 3); '
          f'{dt * 1e6 / 8000:.1f} us per step')

    print('\n== tape.jit: trace once, replay the forward in one Numba call ==')
    xc = tape.randn(16, dtype=tape.float64)
    wc = tape.randn(16, dtype=tape.float64, requires_grad=True)
    bc = tape.randn(16, dtype=tape.float64, requires_grad=True)

    def chain(w, b, x):
        h = x
        for _ in range(100):
            h = tape.tanh(h * w + b)
        return h.sum()

    compiled = tape.jit(chain)
    for name, f in (('eager', chain), ('tape.jit', compiled)):
        f(wc, bc, xc).backward()              # warm up (the jit traces here)
        wc.grad = bc.grad = None
        t0 = time.perf_counter()
        for _ in range(200):
            f(wc, bc, xc).backward()
        dt = (time.perf_counter() - t0) / 200
        print(f'  {name:8s} 100x tanh(h*w+b) on (16,), forward and backward: '
              f'{dt * 1e6:7.1f} us; w.grad[:3] per call = {wc.grad.numpy()[:3] / 200}')
        wc.grad = bc.grad = None
    print('  ', compiled.stats())

    print('\n== torch.nn and torch.optim, with only the import changed ==')
    tape.manual_seed(0)
    model = tape.nn.Sequential(tape.nn.Linear(2, 16), tape.nn.Tanh(), tape.nn.Linear(16, 2))
    opt = tape.optim.Adam(model.parameters(), lr=0.05)
    loss_fn = tape.nn.CrossEntropyLoss()
    pts = tape.randn(200, 2)
    labels = ((pts[:, 0] * pts[:, 1]) > 0).long()      # XOR-like quadrants
    for step in range(201):
        opt.zero_grad()
        loss = loss_fn(model(pts), labels)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            acc = (model(pts).argmax(1) == labels).float().mean().item()
            print(f'  step {step:3d}: loss {loss.item():.4f}, accuracy {acc:.2f}')
    print(model)
    # the 60-minute blitz's walk back from the loss: PyTorch's nodes, one per op
    loss = tape.nn.MSELoss()(model(pts), tape.zeros(200, 2))
    fn, names = loss.grad_fn, []
    while fn is not None:
        names.append(fn.name())
        fn = fn.next_functions[0][0] if fn.next_functions else None
    print('  loss.grad_fn, then next_functions[0][0] down to a leaf:', ' -> '.join(names))


if __name__ == '__main__':
    main()
