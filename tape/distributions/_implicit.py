"""Implicit reparameterization gradients for Gamma and Dirichlet (and so Beta)
samples, ported from PyTorch's ATen ``standard_gamma_grad_one`` and
``dirichlet_grad_one`` (aten/src/ATen/native/Distributions.h, BSD-3-Clause) to
vectorized NumPy (float64 arithmetic, cast back to the sample's dtype).

``d sample / d alpha = -(d cdf / d alpha) / pdf`` at the drawn sample; the
samples themselves come from tape's generator (``tape.manual_seed``).
"""
import numpy as np

import tape as _tape


def _digamma(x):
    """Digamma of positive float64 values (recurrence to x >= 10, then the
    asymptotic series)."""
    x = np.array(x, np.float64, copy=True)
    s = np.zeros_like(x)
    for _ in range(12):
        small = x < 10.0
        if not small.any():
            break
        s -= np.where(small, 1.0 / np.where(small, x, 1.0), 0.0)
        x = np.where(small, x + 1.0, x)
    z = 1.0 / (x * x)
    return s + np.log(x) - 0.5 / x - z * (1.0 / 12 - z * (1.0 / 120 - z * (
        1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132)))))


_COEF_UV = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343,
     1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758,
     0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
     0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07],
])


def standard_gamma_grad(alpha, x):
    """d x / d alpha for x ~ Gamma(alpha, 1) (ATen's standard_gamma_grad_one)."""
    alpha = np.asarray(alpha, np.float64)
    x = np.asarray(x, np.float64)
    alpha, x = np.broadcast_arrays(alpha, x)
    with np.errstate(all='ignore'):
        # Taylor series for small x
        numer = np.ones_like(x)
        denom = alpha.copy()
        series1 = numer / denom
        series2 = numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = x ** alpha
        gamma_pdf = x ** (alpha - 1) * np.exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (np.log(x) - _digamma(alpha)) * gamma_cdf - pow_x_alpha * series2
        small = -gamma_cdf_alpha / gamma_pdf
        small = np.where(np.isnan(small), 0.0, small)

        # Rice saddle point expansion for large alpha
        numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
        numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x)
                   - 65 * x * x / alpha + alpha * (107 + 3600 * x))
        near = numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
        den = np.sqrt(8 * alpha)
        term2 = den / (alpha - x)
        term3 = (x - alpha - alpha * np.log(x / alpha)) ** -1.5
        term23 = np.where(x < alpha, term2 - term3, term2 + term3)
        term1 = np.log(x / alpha) * term23 - np.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) ** 2)
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        far = -stirling * x * term1 / den
        large = np.where((0.9 * alpha <= x) & (x <= 1.1 * alpha), near, far)

        # bivariate rational approximation
        u = np.log(x / alpha)
        v = np.log(alpha)
        cv = [_COEF_UV[0, i] + u * (_COEF_UV[1, i] + u * _COEF_UV[2, i]) for i in range(8)]
        p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
        q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
        rational = np.exp(p / q)
    return np.where(x < 0.8, small, np.where(alpha > 8.0, large, rational))


def _beta_grad_alpha_small(x, alpha, beta):
    factor = _digamma(alpha) - _digamma(alpha + beta) - np.log(x)
    numer = np.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * (1 - x) ** (-beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_beta_small(x, alpha, beta):
    factor = _digamma(alpha + beta) - _digamma(beta)
    numer = np.ones_like(x)
    betas = np.ones_like(x)
    dbetas = np.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -(1 - x) ** (1 - beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = np.sqrt(alpha * beta / (total + 1)) / total
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                    8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    near = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / np.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = np.sqrt(2 * alpha / beta) * total ** 1.5 * axbx * axbx
    term1 = term1_num / term1_den
    term2 = 0.5 * np.log(alpha / (total * x))
    term3 = np.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4_base = beta * np.log(beta / (total * (1 - x))) + alpha * np.log(alpha / (total * x))
    term4 = term4_base ** -1.5
    term1234 = term1 + term2 * (term3 + np.where(x < mean, term4, -term4))
    far = stirling * prefactor * term1234
    return np.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), near, far)


_C = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def dirichlet_grad(x, alpha, total):
    """ATen's dirichlet_grad_one: -(d cdf / d alpha) / pdf / (1 - x) for
    x ~ Beta(alpha, total - alpha)."""
    x, alpha, total = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (x, alpha, total)))
    beta = total - alpha
    boundary = total * x * (1 - x)
    with np.errstate(all='ignore'):
        small_a = _beta_grad_alpha_small(x, alpha, beta)
        small_b = -_beta_grad_beta_small(1 - x, beta, alpha)
        mid = _beta_grad_alpha_mid(x, alpha, beta)
        u = np.log(x)
        a = np.log(alpha) - u
        b = np.log(total) - a
        pow_u = [np.ones_like(u), u, u * u]
        pow_a = [np.ones_like(a), a, a * a]
        p = np.zeros_like(x)
        q = np.zeros_like(x)
        for i in range(3):
            for j in range(3):
                ua = pow_u[i] * pow_a[j]
                c0, c1 = _C[0, i, j], _C[1, i, j]
                p = p + ua * (c0[0] + b * (c0[1] + b * (c0[2] + b * c0[3])))
                q = q + ua * (c1[0] + b * (c1[1] + b * (c1[2] + b * c1[3])))
        approx = x * (_digamma(total) - _digamma(alpha)) / beta
        rational = p / q * approx
    return np.where((x <= 0.5) & (boundary < 2.5), small_a,
                    np.where((x >= 0.5) & (boundary < 0.75), small_b,
                             np.where((alpha > 6) & (beta > 6), mid, rational)))


class StandardGamma(_tape.autograd.Function):
    """Gamma(alpha, 1) samples whose gradient in alpha is the implicit one."""

    @staticmethod
    def forward(ctx, alpha):
        from ._torch import _standard_gamma
        x = _standard_gamma(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        g = standard_gamma_grad(alpha._data, x._data).astype(x._data.dtype)
        return grad * _tape.tensor(g)


class DirichletSample(_tape.autograd.Function):
    """Dirichlet samples whose gradient in the concentration is the implicit one."""

    @staticmethod
    def forward(ctx, concentration):
        from ._torch import _sample_dirichlet
        x = _sample_dirichlet(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        x, concentration = ctx.saved_tensors
        c = concentration._data
        total = np.broadcast_to(c.sum(-1, keepdims=True), c.shape)
        g = _tape.tensor(dirichlet_grad(x._data, c, total).astype(x._data.dtype))
        return g * (grad_output - (x * grad_output).sum(-1, True))
