"""``tape.optim``: PyTorch's optimizers and learning-rate schedulers for tape
tensors (``torch.optim`` with the import changed).

>>> import tape
>>> w = tape.tensor([3.0], requires_grad=True)
>>> opt = tape.optim.SGD([w], lr=0.25)
>>> for _ in range(20):
...     opt.zero_grad()
...     ((w - 1) ** 2).sum().backward()
...     opt.step()
>>> round(w.item(), 4)
1.0
"""
from . import lr_scheduler  # noqa: F401
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ['Optimizer', 'SGD', 'Adam', 'AdamW', 'RMSprop', 'Adagrad', 'LBFGS',
           'lr_scheduler']
