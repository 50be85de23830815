"""L-BFGS, a port of ``torch.optim.LBFGS`` (itself from minFunc): the two-loop
recursion over a limited history of steps and gradient changes, with a fixed
step or PyTorch's strong-Wolfe line search.

The algorithm runs on flat NumPy arrays of the parameters' dtype; scalars
(dot products, step lengths) are NumPy scalars of that dtype, so that float32
parameters round as PyTorch's 0-d float32 tensors do (NumPy >= 2 promotes a
Python float with a NumPy scalar as PyTorch does a Python float with a 0-d
tensor).  The state PyTorch keeps (``d``, ``t``, ``old_dirs``, ``old_stps``,
``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``, ``func_evals``,
``n_iter``, all on the first parameter) is kept under the same names, as tape
tensors where PyTorch has tensors.
"""
import numpy as np

from .._grad_mode import enable_grad, no_grad
from .._tensor import Tensor, _leaf
from .optimizer import Optimizer, _commit, _scalar, _writable

__all__ = ['LBFGS']


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    # minimum of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to the bounds
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = np.dot(g_new, d)

    # bracket an interval containing a point satisfying the Wolfe criteria
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.copy()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = [t]
            bracket_f = [f_new]
            bracket_g = [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.copy()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        # interpolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev = tmp
        f_prev = f_new
        g_prev = g_new.copy()
        gtd_prev = gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = np.dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:
        bracket = [0, t]
        bracket_f = [f, f_new]
        bracket_g = [g, g_new]

    # zoom: refine the bracket until a point satisfies the criteria
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # a t too close to the bracket's ends, twice in a row or outside it,
        # moves to 0.1 of the bracket's length from the nearer end
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = np.dot(g_new, d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # Armijo condition not satisfied or not lower than the lowest point
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new.copy()
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True                      # Wolfe conditions satisfied
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # old high becomes new low
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new.copy()
            bracket_gtd[low_pos] = gtd_new

    t = bracket[low_pos]
    f_new = bracket_f[low_pos]
    g_new = bracket_g[low_pos]
    return f_new, g_new, t, ls_func_evals


def _unwrap(v):
    """A state value as the algorithm uses it: tensors as arrays (0-d ones as
    NumPy scalars), lists element by element."""
    if isinstance(v, Tensor):
        a = np.asarray(v._data)
        return a[()] if a.ndim == 0 else np.array(a)
    if isinstance(v, list):
        return [_unwrap(x) for x in v]
    return v


def _wrap(v):
    """A value of the algorithm as PyTorch keeps it in the state: tensors for
    arrays and NumPy scalars, Python numbers as they are."""
    if isinstance(v, np.ndarray):
        return _leaf(v)
    if isinstance(v, np.generic):
        return _leaf(np.asarray(v))
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class LBFGS(Optimizer):
    """``torch.optim.LBFGS``: each ``step(closure)`` runs up to ``max_iter``
    L-BFGS iterations (``max_eval`` closure calls), stopping early on
    ``tolerance_grad`` (max |gradient|) or ``tolerance_change`` (step or loss
    change).  One parameter group only; the closure is required.

    >>> import tape
    >>> w = tape.tensor([3.0, -1.0], dtype=tape.float64, requires_grad=True)
    >>> opt = tape.optim.LBFGS([w], line_search_fn='strong_wolfe')
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 6) for v in w.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]['params']
        self._numel_cache = None

    def __setstate__(self, state):
        super().__setstate__(state)
        if self.param_groups:
            self._params = self.param_groups[0]['params']
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            d = np.asarray(p._data)
            if p._grad is None:
                views.append(np.zeros(d.size, d.dtype))
            else:
                views.append(np.asarray(p._grad._data).reshape(-1))
        return np.concatenate(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            d = _writable(p)
            numel = d.size
            alpha = d.dtype.type(float(step_size))   # PyTorch casts alpha to the dtype
            d += alpha * update[offset:offset + numel].reshape(d.shape)
            _commit(p, d)
            offset += numel
        if offset != self._numel():
            raise AssertionError(f'Expected offset {offset} to equal {self._numel()}')

    def _clone_param(self):
        return [np.array(p._data) for p in self._params]

    def _set_param(self, params_data):
        for p, pdata in zip(self._params, params_data, strict=True):
            d = _writable(p)
            d[...] = pdata
            _commit(p, d)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Up to ``max_iter`` iterations; returns the loss the closure gave first."""
        if len(self.param_groups) != 1:
            raise AssertionError(
                f'Expected exactly one param_group, but got {len(self.param_groups)}')

        def run_closure():
            with enable_grad():
                return closure()

        with no_grad(), np.errstate(divide='ignore', invalid='ignore', over='ignore'):
            return self._step(run_closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr = _scalar(group['lr'])
        max_iter = group['max_iter']
        max_eval = group['max_eval']
        tolerance_grad = group['tolerance_grad']
        tolerance_change = group['tolerance_change']
        line_search_fn = group['line_search_fn']
        history_size = group['history_size']

        # LBFGS's state is global; PyTorch keeps it on the first parameter
        state = self.state[self._params[0]]
        state.setdefault('func_evals', 0)
        state.setdefault('n_iter', 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state['func_evals'] += 1

        flat_grad = self._gather_flat_grad()
        opt_cond = np.abs(flat_grad).max() <= tolerance_grad
        if opt_cond:
            return orig_loss

        d = _unwrap(state.get('d'))
        t = _unwrap(state.get('t'))
        old_dirs = _unwrap(state.get('old_dirs'))
        old_stps = _unwrap(state.get('old_stps'))
        ro = _unwrap(state.get('ro'))
        H_diag = _unwrap(state.get('H_diag'))
        prev_flat_grad = _unwrap(state.get('prev_flat_grad'))
        prev_loss = _unwrap(state.get('prev_loss'))
        al = _unwrap(state.get('al'))

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state['n_iter'] += 1

            # the descent direction
            if state['n_iter'] == 1:
                d = np.negative(flat_grad)
                old_dirs = []
                old_stps = []
                ro = []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = np.dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / np.dot(y, y)
                num_old = len(old_dirs)
                if al is None:
                    al = [None] * history_size
                # the two-loop recursion, in one buffer
                q = np.negative(flat_grad)
                for i in range(num_old - 1, -1, -1):
                    al[i] = np.dot(old_stps[i], q) * ro[i]
                    q += q.dtype.type(-float(al[i])) * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = np.dot(old_dirs[i], r) * ro[i]
                    r += r.dtype.type(float(al[i] - be_i)) * old_stps[i]

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:
                prev_flat_grad[...] = flat_grad
            prev_loss = loss

            # the step length
            if state['n_iter'] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr

            gtd = np.dot(flat_grad, d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != 'strong_wolfe':
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                # a fixed step; the function is evaluated again except after the last iteration
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state['func_evals'] += ls_func_evals

            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            if opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:     # lack of progress
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state['d'] = _wrap(d)
        state['t'] = _wrap(t)
        state['old_dirs'] = _wrap(old_dirs)
        state['old_stps'] = _wrap(old_stps)
        state['ro'] = _wrap(ro)
        state['H_diag'] = _wrap(H_diag)
        state['prev_flat_grad'] = _wrap(prev_flat_grad)
        state['prev_loss'] = prev_loss
        if al is not None:
            state['al'] = _wrap(al)
        return orig_loss
