"""A stable priority queue and a job scheduler."""

from .queue import Empty, PriorityQueue
from .scheduler import Scheduler

__all__ = ["Empty", "PriorityQueue", "Scheduler"]
