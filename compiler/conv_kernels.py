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


@njit(cache=True, inline='always', error_model='numpy')
def _column_row(b, r, n, ckk, npix, sample_major):
    """Where row ``r`` (channel-tap) of sample ``b`` starts in the columns: per
    sample (N, C*KH*KW, NPIX), or per row (C*KH*KW, N, NPIX)."""
    if sample_major:
        return (b * ckk + r) * npix
    return (r * n + b) * npix


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
    if _flat_shift(sh, sw, ow, w):
        _im2col_flat(xf, cf, n, c, h, w, kh, kw, pt, pl, dh, dw, oh, sample_major)
        return
    for b in range(n):
        for ci in range(c):
            xbase = (b * c + ci) * h * w
            for i in range(kh):
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    rbase = _column_row(b, r, n, ckk, npix, sample_major)
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


# With stride 1 and an output as wide as the input (``padding='same'``, the common
# layer), output pixel k of a kernel offset reads input pixel k + shift of the same
# flattened plane: a column is one long copy (one long add in col2im) instead of OH
# copies of OW elements, whose loop overhead dominated for small images; the
# entries whose window column falls in the padding, a strip at the left or right
# edge, are selected to zero in the same pass (``_column_masks``).
@njit(cache=True, error_model='numpy')
def _flat_shift(sh, sw, ow, w):
    return sh == 1 and sw == 1 and ow == w


@njit(cache=True, error_model='numpy')
def _shifted_band(dr, off, q0, q1, h, w, oh):
    """[start, end): the flat output positions between the first and the last one
    whose input pixel (row p + dr, column q + off) is real, or (0, 0) when none is."""
    p0, p1 = _inside(h, oh, 1, dr)
    if p0 >= p1 or q0 >= q1:
        return 0, 0
    return p0 * w + q0, (p1 - 1) * w + q1


@njit(cache=True, error_model='numpy')
def _column_masks(kw, dw, pl, w, oh):
    """(kw * OH*W,) uint8, for the flat-shift path: whether output position k's
    window column of kernel column j lies inside the image (k % W + j*dw - pl in
    [0, W)), at j * OH*W + k.  The shifted copy selects zero where it does not, in
    the same vectorized pass: no second sweep over the padding strips with scattered
    stores (1.6x faster im2col at 14x14)."""
    npix = oh * w
    mask = np.empty(kw * npix, np.uint8)
    for j in range(kw):
        lo, hi = pl - j * dw, w + pl - j * dw       # q + j*dw - pl in [0, w)
        for p in range(oh):
            base = j * npix + p * w
            for q in range(w):
                mask[np.uint64(base + q)] = (q >= lo) & (q < hi)
    return mask


@njit(cache=True, error_model='numpy')
def _im2col_flat(xf, cf, n, c, h, w, kh, kw, pt, pl, dh, dw, oh, sample_major):
    """``im2col`` on flat arrays for stride 1 and ``OW == W``, all in one function (the
    loops of a helper called per column ran 2x slower)."""
    npix = oh * w
    ckk = c * kh * kw
    mf = _column_masks(kw, dw, pl, w, oh)
    for b in range(n):
        for ci in range(c):
            xbase = (b * c + ci) * h * w
            for i in range(kh):
                dr = i * dh - pt
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    rbase = _column_row(b, r, n, ckk, npix, sample_major)
                    off = j * dw - pl
                    q0, q1 = _inside(w, w, 1, off)
                    start, end = _shifted_band(dr, off, q0, q1, h, w, oh)
                    src = xbase + dr * w + off
                    for k in range(start):
                        cf[np.uint64(rbase + k)] = 0.0
                    if q0 > 0 or q1 < w:        # a padding strip inside the band
                        mbase = j * npix
                        for k in range(start, end):
                            v = xf[np.uint64(src + k)]
                            cf[np.uint64(rbase + k)] = v if mf[np.uint64(mbase + k)] else 0.0
                    else:
                        for k in range(start, end):
                            cf[np.uint64(rbase + k)] = xf[np.uint64(src + k)]
                    for k in range(end, npix):
                        cf[np.uint64(rbase + k)] = 0.0


@njit(cache=True, error_model='numpy')
def col2im(cols, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, gx, sample_major):
    """The adjoint of ``im2col`` (columns in either of its layouts): add every column
    entry back into ``gx`` (N, C, H, W), which is overwritten; padding positions are
    dropped.  ``cols`` is only read."""
    n, c, h, w = gx.shape
    gf = gx.reshape(gx.size)
    cf = cols.reshape(cols.size)
    gf[:] = 0.0
    ckk = c * kh * kw
    npix = oh * ow
    if _flat_shift(sh, sw, ow, w):
        _col2im_flat(cf, gf, n, c, h, w, kh, kw, pt, pl, dh, dw, oh, sample_major)
        return
    for b in range(n):
        for ci in range(c):
            gbase = (b * c + ci) * h * w
            for i in range(kh):
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    rbase = _column_row(b, r, n, ckk, npix, sample_major)
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
def _col2im_flat(cf, gf, n, c, h, w, kh, kw, pt, pl, dh, dw, oh, sample_major):
    """``col2im`` on flat arrays for stride 1 and ``OW == W``: each column one long add,
    zero added at the entries of its padding strip (which the flat add lands on real
    pixels of the neighbouring row)."""
    npix = oh * w
    ckk = c * kh * kw
    mf = _column_masks(kw, dw, pl, w, oh)
    for b in range(n):
        for ci in range(c):
            gbase = (b * c + ci) * h * w
            for i in range(kh):
                dr = i * dh - pt
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    rbase = _column_row(b, r, n, ckk, npix, sample_major)
                    off = j * dw - pl
                    q0, q1 = _inside(w, w, 1, off)
                    start, end = _shifted_band(dr, off, q0, q1, h, w, oh)
                    dst = gbase + dr * w + off
                    if q0 > 0 or q1 < w:
                        mbase = j * npix
                        for k in range(start, end):
                            v = cf[np.uint64(rbase + k)]
                            gf[np.uint64(dst + k)] += v if mf[np.uint64(mbase + k)] else 0.0
                    else:
                        for k in range(start, end):
                            gf[np.uint64(dst + k)] += cf[np.uint64(rbase + k)]


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
def max_pool_2x2(x, oh, ow, out, idx):
    """``max_pool_unpadded`` for a 2x2 window with stride 2 (``MaxPool2d(2)``), the
    window unrolled: the same scan order, ties and NaN rule, 2-3x faster than the
    loops over a window of any size."""
    n, c, h, w = x.shape
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    jf = idx.reshape(idx.size)
    for plane in range(n * c):
        xbase = plane * h * w
        obase = plane * oh * ow
        for p in range(oh):
            top = 2 * p * w                 # the window's first pixel in the plane
            r0 = xbase + top
            o = obase + p * ow
            for q in range(ow):
                a = xf[np.uint64(r0 + 2 * q)]
                b = xf[np.uint64(r0 + 2 * q + 1)]
                cc = xf[np.uint64(r0 + w + 2 * q)]
                d = xf[np.uint64(r0 + w + 2 * q + 1)]
                best = a
                at = 0
                take = (b > best) | (b != b)
                best = b if take else best
                at = 1 if take else at
                take = (cc > best) | (cc != cc)
                best = cc if take else best
                at = w if take else at
                take = (d > best) | (d != d)
                best = d if take else best
                at = w + 1 if take else at
                of[np.uint64(o + q)] = best
                jf[np.uint64(o + q)] = top + 2 * q + at


@njit(cache=True, inline='always')
def _clip_window(start, k, n):
    """The part [lo, hi) of the window [start, start + k) inside [0, n)."""
    return max(start, 0), min(start + k, n)


@njit(cache=True, error_model='numpy')
def avg_pool_window(x, kh, kw, sh, sw, ph, pw, div, out):
    """Window means of (N, C, H, W) ``x`` into ``out`` (N, C, OH, OW): window
    (p, q) starts at row p*sh - ph, column q*sw - pw, and its sum over the
    pixels inside the image (padding adds nothing), in float64 over rows then
    columns, is divided by ``div[p, q]`` (the caller's count: PyTorch's
    count_include_pad rule or divisor_override; PyTorch divides its sum too)
    and rounded once to out's dtype.  Flat indexing, as ``max_pool_unpadded``."""
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for plane in range(n * c):
        xbase = plane * h * w
        obase = plane * oh * ow
        for p in range(oh):
            i0, i1 = _clip_window(p * sh - ph, kh, h)
            for q in range(ow):
                j0, j1 = _clip_window(q * sw - pw, kw, w)
                acc = 0.0
                for i in range(i0, i1):
                    row = xbase + i * w
                    for j in range(j0, j1):
                        acc += xf[np.uint64(row + j)]
                of[np.uint64(obase + p * ow + q)] = acc / div[p, q]


@njit(cache=True, error_model='numpy')
def avg_pool_2x2(x, oh, ow, out):
    """``avg_pool_window`` for a 2x2 window with stride 2 and no padding (``AvgPool2d(2)``),
    the window unrolled: the same sum, in the same order (so the same bits), with
    no loop over the window."""
    n, c, h, w = x.shape
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for plane in range(n * c):
        xbase = plane * h * w
        obase = plane * oh * ow
        for p in range(oh):
            r0 = xbase + 2 * p * w
            o = obase + p * ow
            for q in range(ow):
                acc = np.float64(xf[np.uint64(r0 + 2 * q)]) + xf[np.uint64(r0 + 2 * q + 1)]
                acc = (acc + xf[np.uint64(r0 + w + 2 * q)]) + xf[np.uint64(r0 + w + 2 * q + 1)]
                of[np.uint64(o + q)] = acc / 4.0


@njit(cache=True, error_model='numpy')
def avg_pool_scatter(g, kh, kw, sh, sw, ph, pw, div, out):
    """The adjoint of ``avg_pool_window``: out (N, C, H, W) is overwritten with
    each g[b, c, p, q] / div[p, q] added over its window's pixels inside the
    image (overlapping windows add; pixels no window covers get 0).  The sums
    run in float64."""
    n, c, oh, ow = g.shape
    h, w = out.shape[2], out.shape[3]
    gf = g.reshape(g.size)
    of = out.reshape(out.size)
    acc = np.zeros(h * w)
    for plane in range(n * c):
        acc[:] = 0.0
        gbase = plane * oh * ow
        for p in range(oh):
            i0, i1 = _clip_window(p * sh - ph, kh, h)
            for q in range(ow):
                j0, j1 = _clip_window(q * sw - pw, kw, w)
                v = gf[np.uint64(gbase + p * ow + q)] / div[p, q]
                for i in range(i0, i1):
                    row = i * w
                    for j in range(j0, j1):
                        acc[np.uint64(row + j)] += v
        xbase = plane * h * w
        for i in range(h * w):
            of[np.uint64(xbase + i)] = acc[i]


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
