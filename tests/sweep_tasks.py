"""Module-level task functions for tests/test_sweep.py (Dask workers import them by name)."""

import random
import time


def square_after(x, seconds):
    """``x * x`` after ``seconds``; fails for x = 13, as a task may."""
    time.sleep(seconds)
    if x == 13:
        raise ValueError("thirteen is unlucky")
    return x * x


def seeded_draw(task_id):
    """A value that depends only on the task's own id (how sweep tasks are seeded)."""
    return random.Random(task_id).random()
