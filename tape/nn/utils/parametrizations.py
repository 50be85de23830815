"""``tape.nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm`` and
``orthogonal`` as parametrizations (``tape.nn.utils.parametrize``), as in
``torch.nn.utils.parametrizations``.

>>> import tape
>>> from tape import nn
>>> m = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""
from enum import Enum, auto

import numpy as np

from ..._grad_mode import no_grad
from ..._tensor import Tensor, _leaf
from ..modules import Module
from .. import functional as F
from . import parametrize

__all__ = ['orthogonal', 'spectral_norm', 'weight_norm']


def _tape():
    import tape
    return tape


# -- helpers shared with the legacy weight_norm ---------------------------------
def _norm_except_dim(v, pow=2, dim=0):  # noqa: A002
    """``torch.norm_except_dim``: the ``pow`` norm over every dim but ``dim``,
    keeping the dims (``dim=-1``: the norm of the whole tensor)."""
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in range(v.dim()) if d != dim)
    if not dims:
        return v.abs()
    return _tape().linalg.vector_norm(v, pow, dim=dims, keepdim=True)


def _weight_norm(v, g, dim=0):
    """``torch._weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / _norm_except_dim(v, 2, dim))


# -- orthogonal ------------------------------------------------------------------
def _geqrf_np(a):
    """LAPACK's ``geqrf`` (unblocked, as dgeqr2) on a real matrix: R and the
    Householder vectors in one matrix, and tau."""
    a = np.array(a, dtype=a.dtype, copy=True)
    m, n = a.shape
    k = min(m, n)
    tau = np.zeros(k, a.dtype)
    for j in range(k):
        alpha = a[j, j]
        xnorm = np.linalg.norm(a[j + 1:, j]) if j + 1 < m else 0.0
        if xnorm == 0.0:
            continue
        beta = -np.copysign(np.hypot(alpha, xnorm), alpha)
        tau[j] = (beta - alpha) / beta
        a[j + 1:, j] = a[j + 1:, j] / (alpha - beta)
        a[j, j] = beta
        if j + 1 < n:
            v = np.concatenate([[1.0], a[j + 1:, j]]).astype(a.dtype)
            w = v @ a[j:, j + 1:]
            a[j:, j + 1:] -= tau[j] * np.outer(v, w)
    return a, tau


def _geqrf(A):
    arr = A.detach().numpy()
    batch = arr.shape[:-2]
    flat = arr.reshape((-1,) + arr.shape[-2:])
    outs = [_geqrf_np(x) for x in flat]
    a = np.stack([o[0] for o in outs]).reshape(arr.shape)
    tau = np.stack([o[1] for o in outs]).reshape(batch + (min(arr.shape[-2:]),))
    return _leaf(a), _leaf(tau)


def _householder_product(A, tau):
    """``torch.linalg.householder_product`` from differentiable ops: the first
    ``k`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^H`` with ``v_i``
    column ``i`` of ``A`` below the diagonal and 1 on it."""
    t = _tape()
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    eye = t.eye(m, dtype=A.dtype)
    Q = eye[:, :n].expand(*A.shape[:-2], m, n)
    rows = t.arange(m)
    for i in reversed(range(k)):
        below = (rows > i).to(A.dtype)
        e = (rows == i).to(A.dtype)
        v = A[..., :, i] * below + e                       # (..., m)
        # Q <- (I - tau v v^H) Q
        vq = (v.conj().unsqueeze(-1) * Q).sum(-2, keepdim=True)   # (..., 1, n)
        Q = Q - tau[..., i, None, None] * v.unsqueeze(-1) * vq
    return Q


def _is_orthogonal(Q, eps=None):
    t = _tape()
    n, k = Q.size(-2), Q.size(-1)
    Id = t.eye(k, dtype=Q.dtype)
    eps = 10.0 * n * t.finfo(Q.dtype).eps
    return t.allclose(Q.mH @ Q, Id, atol=eps)


def _make_orthogonal(A):
    """The Q of A's QR decomposition with R's diagonal made positive (geqrf,
    then householder_product, as torch)."""
    X, tau = _geqrf(A)
    Q = _householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError('The householder parametrization does not support complex tensors.')
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer('base', None)

    def forward(self, X):
        t = _tape()
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = t.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = t.matrix_exp(A)
            else:
                Id = t.eye(n, dtype=A.dtype)
                Q = t.linalg.solve(t.add(Id, A, alpha=-0.5), t.add(Id, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if 'base' in self._buffers:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        t = _tape()
        if Q.shape != self.shape:
            raise ValueError(f'Expected a matrix or batch of matrices of shape {self.shape}. '
                             f'Got a tensor of shape {Q.shape}.')
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if 'base' not in self._buffers:
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError('It is not possible to assign to the matrix '
                                          'exponential or the Cayley parametrizations when '
                                          'use_trivialization=False.')
            A, tau = _geqrf(Q)
            a = A.numpy()
            d = np.sign(np.diagonal(a, axis1=-2, axis2=-1))
            d = np.where(tau.numpy() == 0.0, -d, d)
            idx = np.arange(d.shape[-1])
            a[..., idx, idx] = d
            return A.mT if transpose else A
        if n == k:
            Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
        else:
            N = t.randn(*(tuple(Q.size()[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(t.cat([Q, N], dim=-1))
        self.base = Q
        neg_Id = t.zeros_like(Q_init)
        neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_Id


def orthogonal(module, name='weight', orthogonal_map=None, *, use_trivialization=True):
    """Parametrize ``module.<name>`` as an orthogonal (unitary) matrix, as
    ``torch.nn.utils.parametrizations.orthogonal`` (maps ``matrix_exp``,
    ``cayley``, ``householder``)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError('Expected a matrix or batch of matrices. '
                         f'Got a tensor of {weight.ndim} dimensions.')
    if orthogonal_map is None:
        orthogonal_map = ('matrix_exp' if weight.size(-2) == weight.size(-1)
                          or weight.is_complex() else 'householder')
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f'Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# -- weight norm --------------------------------------------------------------------
class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        weight_g = _norm_except_dim(weight, 2, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module, name='weight', dim=0):
    """Parametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every dim
    but ``dim``): ``g`` is ``parametrizations.<name>.original0``, ``v``
    ``original1``; a state dict with the legacy ``<name>_g``/``<name>_v`` keys
    still loads."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(module_, state_dict, prefix, local_metadata, strict,
                                 missing_keys, unexpected_keys, error_msgs):
        g_key = f'{prefix}{name}_g'
        v_key = f'{prefix}{name}_v'
        if g_key in state_dict and v_key in state_dict:
            original0 = state_dict.pop(g_key)
            original1 = state_dict.pop(v_key)
            state_dict[f'{prefix}parametrizations.{name}.original0'] = original0
            state_dict[f'{prefix}parametrizations.{name}.original1'] = original1

    module.register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


# -- spectral norm ---------------------------------------------------------------------
class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError('Dimension out of range (expected to be in range of '
                             f'[-{ndim}, {ndim - 1}] but got {dim})')
        if n_power_iterations <= 0:
            raise ValueError('Expected n_power_iterations to be positive, but got '
                             f'n_power_iterations={n_power_iterations}')
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                weight_mat = self._reshape_weight_to_matrix(weight)
                h, w = weight_mat.size()
                u = weight_mat.new_empty(h).normal_(0, 1)
                v = weight_mat.new_empty(w).normal_(0, 1)
                self.register_buffer('_u', F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer('_v', F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        # torch writes the normalized vectors into the buffers (out=); so do we
        t = _tape()
        with no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(t.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(t.mv(weight_mat.H, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        t = _tape()
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = t.vdot(u, t.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name='weight', n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrize ``module.<name>`` as ``W / sigma(W)``, ``sigma`` estimated by
    power iteration (``n_power_iterations`` a forward in training mode; the
    stored ``_u``/``_v`` in eval mode), as
    ``torch.nn.utils.parametrizations.spectral_norm``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from .. import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module

