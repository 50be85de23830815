"""The modules behind ``tape.utils.benchmark``, laid out like PyTorch's
``torch.utils.benchmark.utils``: ``common`` (``TaskSpec``, ``Measurement``,
unit and significant-figure helpers), ``timer`` (``Timer``) and ``compare``
(``Compare``)."""
