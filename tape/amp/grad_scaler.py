"""``torch.amp.GradScaler`` for tape, step for step as torch's CPU GradScaler.

The scale is a float32 0-d tensor and the growth tracker an int32 one, updated with
the arithmetic of torch's ``_amp_update_scale_`` CPU kernel (scale times factor in
double, stored as float32; growth only when the grown scale is finite).
``unscale_`` multiplies every gradient by the float32 reciprocal of the scale and
records whether any gradient holds an inf/NaN; ``step`` then skips
``optimizer.step()`` for that iteration, and ``update`` backs the scale off.
"""
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

__all__ = ['OptState', 'GradScaler']


def _tape():
    import tape
    return tape


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {'stage': OptState.READY, 'found_inf_per_device': {}}


class GradScaler:
    """Gradient scaling (``torch.amp.GradScaler``)::

        scaler = tape.amp.GradScaler('cpu')
        scaler.scale(loss).backward()
        scaler.step(optimizer)     # unscales; skips optimizer.step() on inf/NaN grads
        scaler.update()            # backoff on inf/NaN, growth every growth_interval

    As in torch, ``device`` defaults to ``'cuda'``; tape has no CUDA, so a
    ``'cuda'`` scaler warns and disables itself, exactly as torch's does on a
    machine without a GPU.  A disabled scaler returns outputs unchanged, ``step``
    just calls ``optimizer.step()`` and the other methods do nothing.

    >>> import tape
    >>> s = tape.amp.GradScaler('cpu', init_scale=8.0)
    >>> s.scale(tape.tensor(2.0))
    tensor(16.)
    >>> s.get_scale(), s.is_enabled()
    (8.0, True)
    """

    def __init__(self, device='cuda', init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if self._device == 'cuda' and enabled:
            warnings.warn('torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  '
                          'Disabling.', stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError('The growth factor must be > 1.0.')
            if backoff_factor >= 1.0:
                raise AssertionError('The backoff factor must be < 1.0.')
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ----------------------------------------------------------- internals
    def _check_scale_growth_tracker(self, funcname):
        fix = ('This may indicate your script did not use scaler.scale(loss or outputs) '
               'earlier in the iteration.')
        if self._scale is None:
            raise AssertionError(f'Attempted {funcname} but _scale is None.  ' + fix)
        if self._growth_tracker is None:
            raise AssertionError(f'Attempted {funcname} but _growth_tracker is None.  ' + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev=None):
        if self._growth_tracker is not None:
            raise AssertionError('_growth_tracker initialized before _scale')
        tape = _tape()
        self._scale = tape.full((), self._init_scale, dtype=tape.float32)
        self._growth_tracker = tape.full((), self._init_growth_tracker, dtype=tape.int32)

    # ------------------------------------------------------------- public
    def scale(self, outputs):
        """Multiply a tensor (or an iterable of tensors, nested) by the scale factor."""
        if not self._enabled:
            return outputs
        tape = _tape()
        if isinstance(outputs, tape.Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale

        def apply_scale(val):
            if isinstance(val, tape.Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale
            if isinstance(val, (list, tuple)):
                return type(val)(map(apply_scale, val))
            if hasattr(val, '__iter__'):
                return map(apply_scale, val)
            raise ValueError('outputs must be a Tensor or an iterable of Tensors')

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        tape = _tape()
        found = False
        with tape.no_grad():
            for group in optimizer.param_groups:
                for param in group['params']:
                    if not isinstance(param, tape.Tensor):
                        raise AssertionError('expected param to be torch.Tensor, got '
                                             f'{type(param).__name__}')
                    g = param.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype == np.float16:
                        raise ValueError('Attempting to unscale FP16 gradients.')
                    if not np.isfinite(np.asarray(g._data)).all():
                        found = True
                    if inv_scale != 1.0:
                        g.mul_(float(inv_scale))
        found_inf = tape.full((), 1.0 if found else 0.0, dtype=tape.float32)
        return {'cpu': found_inf}

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale (once per ``step``), noting
        whether any holds an inf or NaN."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker('unscale_')
        state = self._per_optimizer_states[id(optimizer)]
        if state['stage'] is OptState.UNSCALED:
            raise RuntimeError('unscale_() has already been called on this optimizer since '
                               'the last update().')
        elif state['stage'] is OptState.STEPPED:
            raise RuntimeError('unscale_() is being called after step().')
        # torch: self._scale.double().reciprocal().float()
        inv_scale = np.float32(1.0 / np.float64(self._scale.item()))
        state['found_inf_per_device'] = self._unscale_grads_(optimizer, inv_scale, False)
        state['stage'] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, state, *args, **kwargs):
        retval = None
        if not sum(v.item() for v in state['found_inf_per_device'].values()):
            retval = optimizer.step(*args, **kwargs)
        return retval

    def step(self, optimizer, *args, **kwargs):
        """``unscale_`` (unless already called), then ``optimizer.step()`` unless a
        gradient held an inf/NaN; returns what ``optimizer.step`` returned (or None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if 'closure' in kwargs:
            raise RuntimeError('Closure use is not currently supported if GradScaler is '
                               'enabled.')
        self._check_scale_growth_tracker('step')
        state = self._per_optimizer_states[id(optimizer)]
        if state['stage'] is OptState.STEPPED:
            raise RuntimeError('step() has already been called since the last update().')
        if state['stage'] is OptState.READY:
            self.unscale_(optimizer)
        if len(state['found_inf_per_device']) == 0:
            raise AssertionError('No inf checks were recorded for this optimizer.')
        retval = self._maybe_opt_step(optimizer, state, *args, **kwargs)
        state['stage'] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Back the scale off (inf/NaN seen this iteration) or grow it (after
        ``growth_interval`` clean iterations); or set it to ``new_scale``."""
        if not self._enabled:
            return
        tape = _tape()
        _scale, _growth_tracker = self._check_scale_growth_tracker('update')
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale = tape.full((), new_scale, dtype=tape.float32)
            else:
                reason = ('new_scale should be a float or a 1-element torch.cuda.FloatTensor or '
                          'torch.FloatTensor with requires_grad=False.')
                if new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1:
                    raise AssertionError(reason)
                if new_scale.requires_grad is True:
                    raise AssertionError(reason)
                self._scale = tape.full((), float(new_scale.item()), dtype=tape.float32)
        else:
            found_infs = [f for s in self._per_optimizer_states.values()
                          for f in s['found_inf_per_device'].values()]
            if len(found_infs) == 0:
                raise AssertionError('No inf checks were recorded prior to update.')
            found = float(sum(f.item() for f in found_infs))
            scale = np.float64(np.float32(self._scale.item()))
            tracker = int(self._growth_tracker.item())
            # torch's _amp_update_scale_ CPU kernel
            if found:
                scale = np.float32(scale * self._backoff_factor)
                tracker = 0
            else:
                successful = tracker + 1
                if successful == self._growth_interval:
                    with np.errstate(over='ignore'):
                        grown = np.float32(scale * self._growth_factor)
                    if np.isfinite(grown):
                        scale = grown
                    tracker = 0
                else:
                    tracker = successful
            self._scale = tape.full((), float(np.float32(scale)), dtype=tape.float32)
            self._growth_tracker = tape.full((), tracker, dtype=tape.int32)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _get_scale_async(self):
        return self._scale

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if self._enabled:
            return (self._init_growth_tracker if self._growth_tracker is None
                    else int(self._growth_tracker.item()))
        return 0

    def is_enabled(self):
        """Whether this scaler scales."""
        return self._enabled

    def state_dict(self):
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (an empty dict when disabled)."""
        if self._enabled:
            return {'scale': self.get_scale(), 'growth_factor': self._growth_factor,
                    'backoff_factor': self._backoff_factor,
                    'growth_interval': self._growth_interval,
                    '_growth_tracker': self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict):
        """Load a ``state_dict`` (no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError('The source state dict is empty, possibly because it was saved '
                               'from a disabled instance of GradScaler.')
        tape = _tape()
        self._init_scale = state_dict['scale']
        if self._scale is not None:
            self._scale = tape.full((), state_dict['scale'], dtype=tape.float32)
        self._growth_factor = state_dict['growth_factor']
        self._backoff_factor = state_dict['backoff_factor']
        self._growth_interval = state_dict['growth_interval']
        self._init_growth_tracker = state_dict['_growth_tracker']
        if self._growth_tracker is not None:
            self._growth_tracker = tape.full((), state_dict['_growth_tracker'],
                                             dtype=tape.int32)

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError('A GradScaler instance may only be pickled at the '
                                     'beginning of an iteration, or at the end after '
                                     'scaler.update().')
            state['_init_scale'] = self.get_scale()
            state['_init_growth_tracker'] = self._get_growth_tracker()
            state['_scale'] = None
            state['_growth_tracker'] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]['found_inf_per_device']
