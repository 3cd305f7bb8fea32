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


def square_recording_pid(name, x, seconds, pid_dir):
    """``square_after`` that first writes its process id to ``pid_dir/name``
    (a rerun overwrites it), so a test can kill the worker running it."""
    import os
    from pathlib import Path
    Path(pid_dir, name).write_text(str(os.getpid()))
    return square_after(x, seconds)


def environ_get(name):
    """The worker's value of the environment variable ``name`` (None if unset)."""
    import os
    return os.environ.get(name)


def os_getpid():
    """The process the task ran in."""
    import os
    return os.getpid()


def worker_settings(keys):
    """The worker's Dask settings ``keys`` and its parent process."""
    import os

    import dask
    return [dask.config.get(k) for k in keys], os.getppid()
