"""Warnings that point at the user's call: the first frame outside the birsim package.

Python 3.10 has no ``warnings.warn(skip_file_prefixes=...)``, so the stack level is found
by walking the frames from the caller up to the first whose file is not under this
package's directory (birsim's own lines are never the place a warning names)."""

import os
import sys
import warnings

__all__ = ["warn", "user_stacklevel"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel():
    """The ``stacklevel`` that makes ``warnings.warn``, called by the caller of this
    function, name the first frame outside birsim."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level


def warn(message, category=None):
    """``warnings.warn(message, category)`` (default :class:`birsim.BirsimWarning`) naming
    the user's frame."""
    if category is None:
        from .errors import BirsimWarning as category
    warnings.warn(message, category, stacklevel=user_stacklevel())
