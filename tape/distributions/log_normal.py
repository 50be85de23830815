from __future__ import annotations
from . import _torch as torch
from ._torch import Tensor
from . import constraints
from .distribution import Distribution
from .normal import Normal


__all__ = ["LogNormal"]


class LogNormal(Distribution):
    r"""
    Creates a log-normal distribution parameterized by
    :attr:`loc` and :attr:`scale` where::

        X ~ Normal(loc, scale)
        Y = exp(X) ~ LogNormal(loc, scale)

    (PyTorch builds this as a ``TransformedDistribution`` of ``Normal`` by
    ``ExpTransform``; tape computes the same quantities directly and keeps the
    ``base_dist`` attribute.)

    Args:
        loc (float or Tensor): mean of log of distribution
        scale (float or Tensor): standard deviation of log of the distribution
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None) -> None:
        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(self.base_dist.batch_shape, torch.Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        batch_shape = torch.Size(batch_shape)
        new.base_dist = self.base_dist.expand(batch_shape)
        super(LogNormal, new).__init__(batch_shape, torch.Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def sample(self, sample_shape=torch.Size()):
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=torch.Size()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        # PyTorch's TransformedDistribution.cdf validates log(value) against the base
        # Normal's support (a 0 is log 0 = -inf, inside it; a negative value is NaN)
        y = value.log()
        if self._validate_args:
            self.base_dist._validate_sample(y)
        return self.base_dist.cdf(y)

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
