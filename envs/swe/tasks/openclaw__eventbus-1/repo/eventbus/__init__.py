"""An in-process event bus."""

from .bus import EventBus
from .recorder import Recorder

__all__ = ["EventBus", "Recorder"]
