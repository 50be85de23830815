from __future__ import annotations
r"""``torch.distributions`` for tape: parameterizable probability distributions
and sampling functions, following PyTorch's API (the modules follow PyTorch's
``torch/distributions`` sources, BSD-3-Clause (their copyright notice and
license are in ``LICENSE-PYTORCH`` beside this file), with tape ops so that
log-probabilities, entropies, KL divergences and reparameterized samples are
differentiable in the parameters).  Samples are drawn from tape's generator
(``tape.manual_seed``), so their values differ from PyTorch's.

``Gamma``, ``Beta`` and ``Dirichlet`` samples carry PyTorch's implicit
reparameterization gradients (ported from ATen's approximations).
"""
from . import constraints
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl, _add_kl_info
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .poisson import Poisson
from .uniform import Uniform

_add_kl_info()
del _add_kl_info

__all__ = [
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Dirichlet",
    "Distribution",
    "Exponential",
    "ExponentialFamily",
    "Gamma",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Poisson",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
]
