"""The exceptions tinygrad_attn raises, so users can catch them by kind."""


__all__ = ["AnomalyError", "CheckpointError", "DeviceError", "GradcheckError", "IndexOutOfRange",
           "SaveError", "ShapeError", "TokenizerError"]


class ShapeError(ValueError):
    """An op got operands whose shapes do not fit; the message names the op and the shapes."""


class IndexOutOfRange(ShapeError, IndexError):
    """An integer index past the end of an axis (also an IndexError, so iteration protocols and
    ``except IndexError`` see it as NumPy's)."""


class DeviceError(RuntimeError):
    """An op mixed tensors of two devices, or a device is not available."""


class GradcheckError(AssertionError):
    """The analytic gradient disagrees with central differences."""


class AnomalyError(FloatingPointError):
    """Under ``detect_anomaly()``, an op produced NaN or Inf in its output or a gradient."""


class CheckpointError(ValueError):
    """A file is not a readable tinygrad_attn checkpoint (truncated, foreign or corrupt)."""


class SaveError(OSError):
    """A file could not be written (a full disk, a file-size limit, no permission); the message
    names the file and the space it needs (``reason`` is the message without the file), and any
    earlier file at that path is unchanged."""

    reason = ""


class TokenizerError(ValueError):
    """Text or ids a tokenizer cannot take (a character its vocabulary lacks, an id past its end),
    a vocabulary that cannot be built, or a file that is not a tokenizer; the message names it."""
