"""Numba kernels behind ``tape/nn/_conv.py``: im2col, col2im, a direct depthwise
convolution and max pooling.

Padding is handled by bounds, never by copying the input into a padded buffer:
for every kernel offset the range of output columns whose input column lies
inside the image is computed once, so the inner loops have no branch and run
over contiguous memory when the stride is 1.  Columns are laid out per sample,
``(N, C*kh*kw, OH*OW)``, so that ``W @ cols`` is one BLAS product per sample
that writes NCHW output directly (``sample_major``), or per kernel row over the
whole batch, ``(C*kh*kw, N, OH*OW)``, the layout the weight gradient's single
product wants.  Nothing here compiles at import: ``tape/nn/_conv.py`` imports
this module inside its functions.
"""
import numpy as np
from numba import njit


@njit(cache=True, error_model='numpy')
def _inside(n_in, n_out, stride, offset):
    """[lo, hi): the output positions q whose input position q*stride + offset lies
    in [0, n_in)."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    hi = 0 if n_in - offset <= 0 else (n_in - offset + stride - 1) // stride
    hi = min(hi, n_out)
    lo = min(lo, hi)
    return lo, hi


@njit(cache=True, error_model='numpy')
def im2col(x, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, cols, sample_major):
    """Columns of ``x`` (N, C, H, W) into ``cols``: (N, C*kh*kw, OH*OW) when
    ``sample_major``, else (C*kh*kw, N, OH*OW); zero where the window is padding."""
    n, c, h, w = x.shape
    # flat views, indexed without creating a view per row (each view costs a
    # reference count update)
    xf = x.reshape(n * c * h * w)
    cf = cols.reshape(cols.size)
    ckk = c * kh * kw
    npix = oh * ow
    for b in range(n):
        for ci in range(c):
            xbase = (b * c + ci) * h * w
            for i in range(kh):
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    if sample_major:
                        rbase = (b * ckk + r) * npix
                    else:
                        rbase = (r * n + b) * npix
                    off = j * dw - pl
                    q0, q1 = _inside(w, ow, sw, off)
                    for p in range(oh):
                        ih = p * sh + i * dh - pt
                        base = rbase + p * ow
                        if ih < 0 or ih >= h:
                            for q in range(ow):
                                cf[np.uint64(base + q)] = 0.0
                            continue
                        src = xbase + ih * w + off
                        for q in range(q0):
                            cf[np.uint64(base + q)] = 0.0
                        if sw == 1:
                            for q in range(q0, q1):
                                cf[np.uint64(base + q)] = xf[np.uint64(src + q)]
                        else:
                            for q in range(q0, q1):
                                cf[np.uint64(base + q)] = xf[np.uint64(src + q * sw)]
                        for q in range(q1, ow):
                            cf[np.uint64(base + q)] = 0.0


@njit(cache=True, error_model='numpy')
def col2im(cols, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, gx, sample_major):
    """The adjoint of ``im2col`` (columns in either of its layouts): add every column
    entry back into ``gx`` (N, C, H, W), which is overwritten; padding positions are
    dropped."""
    n, c, h, w = gx.shape
    gf = gx.reshape(gx.size)
    cf = cols.reshape(cols.size)
    gf[:] = 0.0
    ckk = c * kh * kw
    npix = oh * ow
    for b in range(n):
        for ci in range(c):
            gbase = (b * c + ci) * h * w
            for i in range(kh):
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    if sample_major:
                        rbase = (b * ckk + r) * npix
                    else:
                        rbase = (r * n + b) * npix
                    off = j * dw - pl
                    q0, q1 = _inside(w, ow, sw, off)
                    for p in range(oh):
                        ih = p * sh + i * dh - pt
                        if ih < 0 or ih >= h:
                            continue
                        dst = gbase + ih * w + off
                        base = rbase + p * ow
                        if sw == 1:
                            for q in range(q0, q1):
                                gf[np.uint64(dst + q)] += cf[np.uint64(base + q)]
                        else:
                            for q in range(q0, q1):
                                gf[np.uint64(dst + q * sw)] += cf[np.uint64(base + q)]


@njit(cache=True, error_model='numpy')
def depthwise_conv(x, w, sh, sw, pt, pl, dh, dw, oh, ow, y):
    """y[b, o] = corr(x[b, o // m], w[o, 0]) for a convolution with one input channel
    per group (m = out channels per group); ``y`` (N, Cout, OH, OW) is overwritten.
    A loop of scaled row additions: BLAS would see one 1 x kh*kw product per
    channel and sample."""
    n, c, h, wd = x.shape
    cout, _, kh, kw = w.shape
    m = cout // c
    xf = x.reshape(x.size)
    yf = y.reshape(y.size)
    yf[:] = 0.0
    for b in range(n):
        for o in range(cout):
            xbase = (b * c + o // m) * h * wd
            ybase = (b * cout + o) * oh * ow
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, 0, i, j]
                    off = j * dw - pl
                    q0, q1 = _inside(wd, ow, sw, off)
                    for p in range(oh):
                        ih = p * sh + i * dh - pt
                        if ih < 0 or ih >= h:
                            continue
                        src = xbase + ih * wd + off
                        dst = ybase + p * ow
                        if sw == 1:
                            for q in range(q0, q1):
                                yf[np.uint64(dst + q)] += wv * xf[np.uint64(src + q)]
                        else:
                            for q in range(q0, q1):
                                yf[np.uint64(dst + q)] += wv * xf[np.uint64(src + q * sw)]


@njit(cache=True, error_model='numpy')
def depthwise_input_grad(gy, w, sh, sw, pt, pl, dh, dw, gx):
    """The adjoint of ``depthwise_conv`` in x: ``gx`` (N, C, H, W) is overwritten."""
    n, c, h, wd = gx.shape
    cout, _, kh, kw = w.shape
    oh, ow = gy.shape[2], gy.shape[3]
    m = cout // c
    gf = gy.reshape(gy.size)
    xf = gx.reshape(gx.size)
    xf[:] = 0.0
    for b in range(n):
        for o in range(cout):
            xbase = (b * c + o // m) * h * wd
            gbase = (b * cout + o) * oh * ow
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, 0, i, j]
                    off = j * dw - pl
                    q0, q1 = _inside(wd, ow, sw, off)
                    for p in range(oh):
                        ih = p * sh + i * dh - pt
                        if ih < 0 or ih >= h:
                            continue
                        src = gbase + p * ow
                        dst = xbase + ih * wd + off
                        if sw == 1:
                            for q in range(q0, q1):
                                xf[np.uint64(dst + q)] += wv * gf[np.uint64(src + q)]
                        else:
                            for q in range(q0, q1):
                                xf[np.uint64(dst + q * sw)] += wv * gf[np.uint64(src + q)]


@njit(cache=True, error_model='numpy')
def depthwise_weight_grad(x, gy, sh, sw, pt, pl, dh, dw, gw):
    """The adjoint of ``depthwise_conv`` in w: ``gw`` (Cout, 1, kh, kw) is overwritten.
    Products are summed into a row of partial sums first, so the inner loop is an
    elementwise update that vectorizes (a scalar reduction would not, without
    fastmath)."""
    n, c, h, wd = x.shape
    cout, _, kh, kw = gw.shape
    oh, ow = gy.shape[2], gy.shape[3]
    m = cout // c
    xf = x.reshape(x.size)
    gf = gy.reshape(gy.size)
    acc = np.empty(ow, gw.dtype)
    for o in range(cout):
        for i in range(kh):
            for j in range(kw):
                acc[:] = 0.0
                off = j * dw - pl
                q0, q1 = _inside(wd, ow, sw, off)
                for b in range(n):
                    xbase = (b * c + o // m) * h * wd
                    gbase = (b * cout + o) * oh * ow
                    for p in range(oh):
                        ih = p * sh + i * dh - pt
                        if ih < 0 or ih >= h:
                            continue
                        src = xbase + ih * wd + off
                        g = gbase + p * ow
                        if sw == 1:
                            for q in range(q0, q1):
                                acc[np.uint64(q)] += gf[np.uint64(g + q)] * xf[np.uint64(src + q)]
                        else:
                            for q in range(q0, q1):
                                acc[np.uint64(q)] += (gf[np.uint64(g + q)]
                                                      * xf[np.uint64(src + q * sw)])
                gw[o, 0, i, j] = acc.sum()


@njit(cache=True, error_model='numpy')
def max_pool(x, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, out, idx):
    """Max pooling of ``x`` (N, C, H, W) into ``out`` and the flat ``h * W + w`` index
    of each maximum into ``idx`` (N, C, OH, OW), as PyTorch's CPU kernel scans: only
    real pixels, the first maximum on ties (``>``), a NaN always taking over (so the
    last NaN wins), and an all -inf window keeping its first real pixel."""
    n, c, h, w = x.shape
    for b in range(n):
        for ci in range(c):
            plane = x[b, ci]
            for p in range(oh):
                h0 = p * sh - pt
                i0 = 0 if h0 >= 0 else (-h0 + dh - 1) // dh
                for q in range(ow):
                    w0 = q * sw - pl
                    j0 = 0 if w0 >= 0 else (-w0 + dw - 1) // dw
                    best = -np.inf
                    at = (h0 + i0 * dh) * w + (w0 + j0 * dw)
                    for i in range(i0, kh):
                        ih = h0 + i * dh
                        if ih >= h:
                            break
                        for j in range(j0, kw):
                            iw = w0 + j * dw
                            if iw >= w:
                                break
                            v = plane[ih, iw]
                            if v > best or np.isnan(v):
                                best = v
                                at = ih * w + iw
                    out[b, ci, p, q] = best
                    idx[b, ci, p, q] = at


@njit(cache=True, error_model='numpy')
def max_pool_unpadded(x, kh, kw, sh, sw, oh, ow, out, idx):
    """``max_pool`` without padding or dilation (every window inside the image), the
    common case, with the same scan and ties: a window's first pixel is its starting
    maximum (what ``max_pool``'s -inf start gives when that pixel is real), a later
    one takes over when greater or NaN.  Flat indexing, no per-pixel bounds tests:
    several times faster than the general kernel."""
    n, c, h, w = x.shape
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    jf = idx.reshape(idx.size)
    for plane in range(n * c):
        xbase = plane * h * w
        obase = plane * oh * ow
        for p in range(oh):
            for q in range(ow):
                at = p * sh * w + q * sw
                best = xf[np.uint64(xbase + at)]
                for i in range(kh):
                    row = (p * sh + i) * w + q * sw
                    for j in range(kw):
                        v = xf[np.uint64(xbase + row + j)]
                        # selects, not branches: on real data the comparison is a
                        # coin flip, and a mispredicted branch per pixel cost more
                        # than the rest of the loop
                        take = (v > best) | (v != v)
                        best = v if take else best
                        at = row + j if take else at
                of[np.uint64(obase + p * ow + q)] = best
                jf[np.uint64(obase + p * ow + q)] = at


@njit(cache=True, error_model='numpy')
def rows_to_samples(y, b, out):
    """out[n, o, :] = y[o, n, :] (+ b[o] when ``b`` has entries): the (Cout, N, L) result
    of one product over the whole batch back to NCHW, the bias added on the way."""
    cout, n, npix = y.shape
    yf = y.reshape(y.size)
    of = out.reshape(out.size)
    has_bias = b.shape[0] > 0
    for o in range(cout):
        bo = b[o] if has_bias else 0.0
        for s in range(n):
            src = (o * n + s) * npix
            dst = (s * cout + o) * npix
            if has_bias:
                for k in range(npix):
                    of[np.uint64(dst + k)] = yf[np.uint64(src + k)] + bo
            else:
                for k in range(npix):
                    of[np.uint64(dst + k)] = yf[np.uint64(src + k)]


@njit(cache=True, error_model='numpy')
def pool_scatter(g, idx, out):
    """out[b, c, idx[b, c, o]] += g[b, c, o] over flattened spatial dims; ``out``
    (N, C, HW) is overwritten.  Overlapping windows may pick one pixel twice."""
    n, c, hw = out.shape
    m = g.shape[2]
    out[:] = 0.0
    for b in range(n):
        for ci in range(c):
            for o in range(m):
                out[b, ci, idx[b, ci, o]] += g[b, ci, o]


@njit(cache=True, error_model='numpy')
def max_pool3d(x, kd, kh, kw, sd, sh, sw, pd, pt, pl, dd, dh, dw, od, oh, ow, out, idx):
    """``max_pool`` over (N, C, D, H, W): the flat ``d * H * W + h * W + w`` index of
    each window's maximum into ``idx`` and the maximum into ``out`` (N, C, OD, OH, OW),
    scanning depth, then rows, then columns, as PyTorch's CPU kernel."""
    n, c, dep, h, w = x.shape
    for b in range(n):
        for ci in range(c):
            vol = x[b, ci]
            for r in range(od):
                d0 = r * sd - pd
                l0 = 0 if d0 >= 0 else (-d0 + dd - 1) // dd
                for p in range(oh):
                    h0 = p * sh - pt
                    i0 = 0 if h0 >= 0 else (-h0 + dh - 1) // dh
                    for q in range(ow):
                        w0 = q * sw - pl
                        j0 = 0 if w0 >= 0 else (-w0 + dw - 1) // dw
                        best = -np.inf
                        at = ((d0 + l0 * dd) * h + (h0 + i0 * dh)) * w + (w0 + j0 * dw)
                        for m in range(l0, kd):
                            idp = d0 + m * dd
                            if idp >= dep:
                                break
                            for i in range(i0, kh):
                                ih = h0 + i * dh
                                if ih >= h:
                                    break
                                for j in range(j0, kw):
                                    iw = w0 + j * dw
                                    if iw >= w:
                                        break
                                    v = vol[idp, ih, iw]
                                    if v > best or np.isnan(v):
                                        best = v
                                        at = (idp * h + ih) * w + iw
                        out[b, ci, r, p, q] = best
                        idx[b, ci, r, p, q] = at
