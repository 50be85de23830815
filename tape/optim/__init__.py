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
from . import swa_utils  # noqa: F401
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ['Optimizer', 'SGD', 'Adam', 'AdamW', 'RMSprop', 'Adagrad', 'LBFGS',
           'Adamax', 'NAdam', 'RAdam', 'Adadelta', 'Adafactor', 'ASGD', 'Rprop', 'lr_scheduler',
           'swa_utils']
