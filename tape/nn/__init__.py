"""``tape.nn``: modules (``tape.nn.Module``, ``Linear``, ``Sequential``, losses, ...),
the functional interface (``tape.nn.functional``), ``init`` and ``utils``."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
from . import modules  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import RemovableHandle  # noqa: F401
from ._conv_modules import *  # noqa: F401,F403
from ._rnn import *  # noqa: F401,F403
from ._more_modules import *  # noqa: F401,F403
from ._attention import *  # noqa: F401,F403
from ._modules_more import *  # noqa: F401,F403
from ._spatial import *  # noqa: F401,F403
from ._fractional import *  # noqa: F401,F403
