"""Specialized front functions for the binary operators' recording fast lanes.

``_ops._binary`` builds one generic ``fwd(a, b)`` per operator, which handles
every case (promotion, broadcasting, leaves, constants, big records) and
tests the operator's own constants -- which operands its rule saves, whether
one operand is read only by the other's gradient -- on every call.  On a
chain of small ops those tests are a measurable share of the time: the
interpreter runs each ``if saves & 1`` whether or not the operator saves
anything.  Here the two common lanes (two tensors of one size and dtype on a
live tape, and a tensor on a live tape with a Python number) are written out
per operator from a source template, with those constants folded away, and
everything else is passed to the generic ``fwd`` unchanged.

The fronts are plain Python (not Numba), built with ``exec`` at import;
their source is registered in ``linecache`` under a ``<tape front ...>`` name,
so tracebacks show it.  What a lane records is exactly what ``fwd``'s inline
lane records: the record layout lives in tape/_tape.py.
"""
import linecache
import textwrap

import numpy as np

from ._big import BIG
from ._tape import PACK, PACK_C, grad_mode, grad_off, open_tape
from ._tensor import Tensor, _TNEW


def _result(indent):
    """Source lines that make the result tensor of record ``k`` at ``slot`` and
    return it (``_ops._result`` inline), at ``indent`` spaces."""
    pad = ' ' * indent
    return ('\n' + pad).join([
        't = TNEW(Tensor)', 't._data = out', 't._rg = True', 't._tape = tape',
        't._goff = slot', 't._rec = k', 'tape.n = k + 1', 'return t'])


def _constant_lane(compute, indent):
    """Source lines for an operand ``a`` that is not on any tape and does not
    require grad (data, a constant): a small float32 or float64 ndarray gets
    ``compute`` (which sets ``out``; its dtype is ``a``'s) wrapped in a leaf
    that does not require grad, as ``_tensor._leaf`` makes it.  Anything else,
    or an error or floating-point warning, goes to the generic recorder."""
    pad = ' ' * indent
    return ('\n' + pad).join([
        'ad = a._data',
        'if type(ad) is ndarray:',
        '    dt = ad.dtype',
        '    if (dt is F64 or dt is F32) and ad.size < BIG:',
        '        try:',
        f'            {compute}',
        '        except (ValueError, OverflowError, RuntimeWarning):',
        '            return generic(a, b)',
        '        t = TNEW(Tensor)', '        t._data = out', '        t._rg = False',
        '        t._tape = None', '        t._goff = -1', '        t._rec = 0', '        return t'])


def _box_lines(operand, other_goff, tape_of, for_other):
    """Source lines that remember a leaf or constant operand's version when its
    record saves it (``Tape.save_box`` inline); a saved operand read only by
    the other's gradient matters only when that other requires grad."""
    cond = f'{tape_of} is None'
    if for_other:
        cond += f' and {other_goff} >= 0'
    return [
        f'if {cond}:',
        f'    box = {operand}._vbox',
        '    if box is None:',
        f'        box = {operand}._vbox = [0]',
        '    tape.boxes.append((box, box[0], k))',
    ]


def _binary_source(name, b_saves, a_for_b, b_for_a, scalar_lane, save_a_lane, num_uf):
    """The source of ``make(generic)``, which returns the front of operator ``name``."""
    saves = []
    if b_saves & 1:
        saves.append('ad')
    if b_saves & 2:
        saves.append('bd')
    if b_saves & 4:
        saves.append('out')
    body = []
    if saves:
        body.append('saved = tape.saved')
        for s in saves:
            body.append(f'saved.append({s})')
    if b_saves & 1:
        body += _box_lines('a', 'g1', 'ta', a_for_b)
    if b_saves & 2:
        body += _box_lines('b', 'g0', 'tbb', b_for_a)
    body.append('tape.rec += PACK(OPC, slot, n, g0, g1, v, 0, 0)')
    if saves:
        body.append('tape.vpos = v + n' + ' + n' * (len(saves) - 1))
    tensor_lane = '\n'.join(' ' * 24 + line for line in body)

    scalar = ''
    if scalar_lane or save_a_lane:
        # (on a small ndarray, a cached 0-d array of its dtype instead of the
        # Python number: NumPy converts a number on every call; on a NumPy
        # scalar, as a 0-d chain carries, the operator itself is fastest)
        array_compute = 'out = uf(ad, num_array(b, ad.dtype))' if num_uf else 'out = npf(ad, b)'
        const_compute = 'out = uf(ad, num_array(b, dt))' if num_uf else 'out = npf(ad, b)'
        save = ''
        vfield = '0'
        if save_a_lane:
            save = ('                v = tape.vpos\n'
                    '                tape.saved.append(ad)\n'
                    '                tape.vpos = v + n\n')
            vfield = 'v'
        scalar = f'''\
        tape = a._tape
        if tape is not None:
            if tape.alias is None and (not grad_off[0] or grad_mode.enabled):
                ad = a._data
                if type(ad) is ndarray:
                    n = ad.size
                    if n >= BIG:
                        return generic(a, b)
                    try:
                        {array_compute}
                    except (ValueError, OverflowError, RuntimeWarning):
                        return generic(a, b)
                    slot = tape.gpos
                    tape.gpos = slot + (n or 1)
                else:
                    # a NumPy scalar (a 0-d chain's values): one element, and
                    # the operator on it is fastest
                    n = 1
                    try:
                        out = npf(ad, b)
                    except (ValueError, OverflowError, RuntimeWarning):
                        return generic(a, b)
                    slot = tape.gpos
                    tape.gpos = slot + 1
{save}                k = tape.n
                tape.rec += PACK_C(SOP, slot, n, a._goff, -1, {vfield}, 0, b)
                {_result(16)}
        elif not a._rg:
            {_constant_lane(const_compute, 12)}'''
        scalar = textwrap.indent(textwrap.dedent(scalar), ' ' * 12)

    return f'''\
def make(generic):
    def {name}(a, b):
        tb = type(b)
        {'if tb is float:' if scalar else ''}
{scalar}
        {'elif' if scalar else 'if'} tb is Tensor:
            ta = a._tape
            tbb = b._tape
            tape = ta if ta is not None else tbb
            if tape is None:
                if not (a._rg or b._rg):
                    # two constants of one float dtype and size: no graph
                    bd = b._data
                    if type(bd) is ndarray and bd.size == a._data.size and bd.dtype is a._data.dtype:
                        {_constant_lane('out = npf(ad, bd)', 24)}
                    return generic(a, b)
                if grad_off[0] and not grad_mode.enabled:
                    return generic(a, b)
                # two leaves (or a leaf and a constant): the graph starts on
                # the thread's open tape, as the generic recorder's would
                tape = open_tape()
            if tape.alias is None and (tbb is None or tbb is tape) and (
                    not grad_off[0] or grad_mode.enabled):
                ad = a._data
                bd = b._data
                n = ad.size
                # equal sizes of one dtype: broadcasting at most added size-1
                # dims, which keeps the flat C order (checked on the result)
                if n < BIG and n == bd.size and bd.dtype is ad.dtype:
                    try:
                        out = npf(ad, bd)
                    except (ValueError, RuntimeWarning):
                        return generic(a, b)
                    if out.size == n:
                        # a leaf operand takes its cached slot on this tape (or registers)
                        if ta is tape:
                            g0 = a._goff
                        elif not a._rg:
                            g0 = -1
                        elif a._rec == tape.serial:
                            g0 = a._goff
                        else:
                            g0 = tape.leaf_slot(a)
                        if tbb is tape:
                            g1 = b._goff
                        elif not b._rg:
                            g1 = -1
                        elif b._rec == tape.serial:
                            g1 = b._goff
                        else:
                            g1 = tape.leaf_slot(b)
                        slot = tape.gpos
                        tape.gpos = slot + (n or 1)
                        v = tape.vpos
                        k = tape.n
{tensor_lane}
                        {_result(24)}
        {'elif tb is int:' if scalar else ''}
{scalar}
        return generic(a, b)
    return {name}
'''


_count = [0]


def binary_front(name, opc, sop, b_saves, a_for_b, b_for_a, npf, uf, scalar_lane,
                 save_a_lane, num_uf, num_array):
    """``make(generic)`` for operator ``name``: ``make(fwd)`` is the front that
    records the common lanes itself and calls ``fwd(a, b)`` for the rest.

    ``scalar_lane``: a Python-number operand records the scalar op ``sop``
    saving nothing; ``save_a_lane``: ... saving ``a`` (``x ** 2``).
    """
    src = _binary_source(name, b_saves, a_for_b, b_for_a, scalar_lane, save_a_lane, num_uf)
    return _build(name, src, {'OPC': opc, 'SOP': sop, 'npf': npf, 'uf': uf,
                              'num_array': num_array})


def _reflected_source(name, record_lane, num_uf):
    """The source of ``make(generic)`` for the reflected operator ``b (op) a``
    of a tensor ``a`` and a Python number ``b`` (``0.5 * x``, ``1 - x``): the
    recording lane of the generic ``rfwd`` (when the reflected scalar op
    saves nothing) and the constant lane."""
    compute = ('out = uf(num_array(b, ad.dtype), ad) if type(ad) is ndarray '
               'else npf(b, ad)') if num_uf else 'out = npf(b, ad)'
    const_compute = 'out = uf(num_array(b, dt), ad)' if num_uf else 'out = npf(b, ad)'
    record = f'''\
            if tape.alias is None and (not grad_off[0] or grad_mode.enabled):
                ad = a._data
                n = ad.size
                if n < BIG:
                    try:
                        {compute}
                    except (ValueError, OverflowError, RuntimeWarning):
                        return generic(a, b)
                    slot = tape.gpos
                    tape.gpos = slot + (n or 1)
                    k = tape.n
                    tape.rec += PACK_C(ROP, slot, n, a._goff, -1, 0, 0, b)
                    {_result(20)}''' if record_lane else 'pass'
    record = textwrap.indent(textwrap.dedent(record), ' ' * 16)
    return f'''\
def make(generic):
    def r{name}(a, b):
        tb = type(b)
        if tb is float or tb is int:
            tape = a._tape
            if tape is not None:
{record}
            elif not a._rg:
                {_constant_lane(const_compute, 16)}
        return generic(a, b)
    return r{name}
'''


def reflected_front(name, rop, record_lane, npf, uf, num_uf, num_array):
    """``make(generic)`` for the reflected operator of ``name``, as
    ``binary_front``'s: ``record_lane`` when the reflected scalar op ``rop``
    records the number in its record and saves nothing."""
    return _build('r' + name, _reflected_source(name, record_lane, num_uf), {
        'ROP': rop, 'npf': npf, 'uf': uf, 'num_array': num_array})


def _build(name, src, consts):
    """Compile ``src`` (blank lines dropped) and return its ``make``; the source
    goes into linecache so that tracebacks through a front show its lines."""
    src = ''.join(line for line in src.splitlines(True) if line.strip())
    _count[0] += 1
    filename = f'<tape front {name} {_count[0]}>'
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {'__name__': __name__, 'Tensor': Tensor, 'TNEW': _TNEW, 'BIG': BIG, 'PACK': PACK, 'PACK_C': PACK_C,
          'grad_off': grad_off, 'grad_mode': grad_mode, 'open_tape': open_tape,
          'ndarray': np.ndarray, 'F64': np.dtype(np.float64),
          'F32': np.dtype(np.float32)}
    ns.update(consts)
    exec(compile(src, filename, 'exec'), ns)
    return ns['make']


def _unary_source(name, saves):
    body = []
    count = 0
    if saves & 1:
        body.append('tape.saved.append(ad)')
        count += 1
    if saves & 4:
        body.append('tape.saved.append(out)')
        count += 1
    body.append('tape.rec += PACK(OPC, slot, n, a._goff, -1, v, 0, 0)')
    if count:
        body.append('tape.vpos = v + n' + ' + n' * (count - 1))
    lane = '\n'.join(' ' * 20 + line for line in body)
    return f'''\
def make(generic):
    def {name}(a, *, out=None):
        if out is None and type(a) is Tensor:
            tape = a._tape
            if tape is not None and tape.alias is None and (
                    not grad_off[0] or grad_mode.enabled):
                ad = a._data
                n = ad.size
                if n < BIG:
                    try:
                        out = small(ad) if n < SMALL_UNDER else npf(ad)
                    except RuntimeWarning:
                        return generic(a)
                    slot = tape.gpos
                    tape.gpos = slot + (n or 1)
                    v = tape.vpos
                    k = tape.n
{lane}
                    {_result(20)}
        return generic(a, out=out)
    return {name}
'''


def unary_front(name, opc, saves, npf, small, small_under):
    """``make(generic)`` for the elementwise unary op ``name``: the front records
    an operand on a live tape itself (``small`` computes operands of fewer
    than ``small_under`` elements, ``npf`` the rest) and calls
    ``generic(a, out=out)`` for everything else."""
    return _build(name, _unary_source(name, saves), {
        'OPC': opc, 'npf': npf, 'small': small, 'SMALL_UNDER': small_under})
