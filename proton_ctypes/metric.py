"""Metric values given to scopes and launch hooks, as ``triton.profiler.metric``.

``transform_tensor_metrics`` splits host values from device tensors (see
:mod:`.core.metric_values`); ``set_metric_kernels`` compiles the two small Triton kernels
that write device-tensor metrics (see :mod:`.core.tensor_metrics`).
"""
from .core import tensor_metrics as _tensor_metrics
from .core.metric_values import FLOPS_WIDTHS, TensorMetric, transform_tensor_metrics

__all__ = ["FLOPS_WIDTHS", "TensorMetric", "transform_tensor_metrics", "set_metric_kernels"]


def set_metric_kernels() -> None:
    """Compile (once) the two Triton kernels that write device-tensor metrics.

    A no-op until a device tensor metric is first used.
    """
    _tensor_metrics.ensure_kernels()
