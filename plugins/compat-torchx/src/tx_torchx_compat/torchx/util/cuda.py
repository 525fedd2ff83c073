"""``torchx.util.cuda``: TorchX 0.7.0's ``has_cuda_devices``."""

__all__ = ["has_cuda_devices"]


def has_cuda_devices() -> bool:
    """Whether torch is installed and sees at least one CUDA device."""
    try:
        import torch  # deferred: torch only when asked (it may not be installed)
    except ImportError:
        return False
    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
