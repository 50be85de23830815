"""``torch.random`` for tape: the default generator's seeding and state, and ``fork_rng``.

These are tape's own generator functions (``tape.manual_seed``, ``tape.get_rng_state``,
...): tape's default generator is a NumPy ``Generator``, so states are tape's bytes,
not PyTorch's, and seeds give tape's streams, not PyTorch's.

>>> import tape
>>> _ = tape.random.manual_seed(0)
>>> with tape.random.fork_rng():
...     _ = tape.rand(3)
>>> a = tape.rand(2)
>>> _ = tape.random.manual_seed(0)
>>> bool((tape.rand(2) == a).all())
True
"""
import contextlib

__all__ = ['set_rng_state', 'get_rng_state', 'manual_seed', 'seed', 'initial_seed',
           'fork_rng']


def _tape():
    import tape
    return tape


def manual_seed(seed):
    """Seed tape's default generator (``tape.manual_seed``); returns the generator."""
    return _tape().manual_seed(seed)


def seed():
    """Seed the default generator from fresh entropy and return the seed."""
    return _tape().seed()


def initial_seed():
    """The seed the default generator was last seeded with."""
    return _tape().initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor."""
    return _tape().get_rng_state()


def set_rng_state(new_state):
    """Restore a state from ``get_rng_state``."""
    _tape().set_rng_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller='fork_rng', _devices_kw='devices',
             device_type=None):
    """Run the block, then put the default generator (state and ``initial_seed``) back
    as it was (``torch.random.fork_rng``).  ``devices`` and ``device_type`` are accepted
    and ignored: tape has only the CPU generator.  ``enabled=False`` is a no-op."""
    if not enabled:
        yield
        return
    tape = _tape()
    saved_seed = tape._seed[0]
    saved_state = tape.get_rng_state()
    try:
        yield
    finally:
        tape._seed[0] = saved_seed
        tape.set_rng_state(saved_state)
