"""One sweep layer for kvfabric's long jobs, on ``dask.distributed``.

A sweep is a list of independent tasks, each a picklable argument tuple for
one module-level function and seeded from its own id, never from the order in
which tasks run. :func:`run_sweep` runs them on a Dask cluster and returns
one :class:`TaskResult` per task **in the order of the list**, so a report
built from the results is the same whatever the number of workers and the
completion order.

Where the tasks run:

* by default a ``LocalCluster`` of worker processes (one thread each) sized to
  the request (``workers``), so every ``make`` target works on a laptop; its
  workers are forked from a fork server that has imported the task's module
  (:func:`_local_config` says why each setting is there);
* ``KVFABRIC_SCHEDULER=tcp://HOST:PORT`` (or ``scheduler=``) sends them to a
  running scheduler instead, e.g. one whose workers ``dask-jobqueue`` started
  on SLURM or LSF (README, "Long jobs on a cluster").

Faults: a worker that dies mid-task has its tasks rerun on another worker by
the scheduler (Dask's ``allowed-failures``), so the results do not change; a
task that raises is reported with its id and error, and every other task
still runs. Each result carries the task's wall and CPU seconds and the worker
that ran it, for the report's timing fields.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["SCHEDULER_ENV", "TaskResult", "SweepError", "run_sweep", "predicted_wall"]

#: Environment variable naming a running Dask scheduler (``tcp://host:port``).
SCHEDULER_ENV = "KVFABRIC_SCHEDULER"


def predicted_wall(times: Sequence[float], workers: int) -> float:
    """Wall time of independent tasks of the given ``times`` on ``workers``
    workers: greedy list scheduling, longest task first (what a scheduler
    that hands the next task to the first free worker achieves within 4/3 of
    the best; never below the longest task).  Reports use it to predict a
    sweep's wall time on a cluster from the task times measured here."""
    loads = [0.0] * workers
    for t in sorted(times, reverse=True):
        i = loads.index(min(loads))
        loads[i] += t
    return max(loads) if loads else 0.0


class SweepError(RuntimeError):
    """The sweep could not start (no scheduler at the address, bad worker count)."""


@dataclass
class TaskResult:
    """What one task gave: its ``value``, or the ``error`` it raised."""

    task_id: str
    value: Any = None
    error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    worker: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def _timed_call(fn, task_id, args):
    """Run ``fn(*args)`` in a worker; never raises (the error travels back)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        value, error = fn(*args), None
    except Exception as exc:  # the task's failure is a result, not the sweep's
        value = None
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    worker = ""
    try:
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        pass
    return TaskResult(task_id, value, error, time.perf_counter() - wall0, time.process_time() - cpu0, worker)


def _local_config() -> dict:
    """Dask settings for the LocalCluster (they are read when the cluster
    starts and again when a nanny restarts a dead worker, so they stay set for
    the whole sweep). Each entry is there for the wall time of a sweep on a
    small machine, measured against a plain process pool (issue #29,
    reports/sweep_overhead.md):

    * no work stealing: tasks start in list order (the callers put the
      longest first), which packs a sweep of unequal tasks best on few workers;
    * workers forked from a fork server that has already imported
      ``distributed`` and the task's module, instead of spawned interpreters
      that each import them afresh (about a second per sweep on two cores);
      a fork server rather than a plain fork because the client process has
      threads (its event loop, the progress bar) and forking a threaded
      process can deadlock; ``spawn`` where there is no fork server (Windows);
    * no statistical profiler in the workers: it samples the task's stack
      every 10 ms for the dashboard's profile page, which these clusters do
      not serve, and cost about 1.5 % of each task's CPU time;
    * slower housekeeping: every server (scheduler, nanny, worker) checks its
      event loop's health every 20 ms, the nannies poll their worker's memory
      every 100 ms and each process samples its CPU and memory every 500 ms.
      On two workers that took 0.8 CPU s per 10 s of sleeping tasks (0.5 in
      this process, 0.17 in each worker), 4 % of a two-core machine taken
      from the tasks; at 500 ms, 1 s and 2 s it takes 0.18 (measured with
      two 10 s sleeps). The cost: a blocked event loop is noticed later and
      a worker over its memory limit is stopped up to a second later.
    """
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return {"distributed.scheduler.work-stealing": False,
            "distributed.worker.multiprocessing-method": method,
            "distributed.worker.profile.enabled": False,
            "distributed.admin.tick.interval": "500ms",
            "distributed.worker.memory.monitor-interval": "1s",
            "distributed.admin.system-monitor.interval": "2s"}


def _preload(fn: Callable) -> None:
    """Have the fork server import ``fn``'s module before it forks the first
    worker, so each worker starts with it imported. Only effective before the
    process's first fork server starts (later sweeps reuse that server, and
    their workers import a new module themselves on the first task)."""
    import dask
    from distributed.utils import get_mp_context

    if dask.config.get("distributed.worker.multiprocessing-method") != "forkserver":
        return
    ctx = get_mp_context()   # distributed sets its own preload list here, once
    module = getattr(fn, "__module__", None)
    if module and module != "__main__":
        ctx.set_forkserver_preload(["distributed", module])


def _client(workers: int, scheduler: str | None, connect_timeout: str, processes: bool = True):
    """A Dask client: to ``scheduler`` (or $KVFABRIC_SCHEDULER), else to a new
    LocalCluster of ``workers`` single-threaded processes, or threads of this
    process when not ``processes`` (call it under :func:`_local_config`).
    Returns ``(client, cluster or None)``."""
    from distributed import Client, LocalCluster

    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address:
        try:
            return Client(address, timeout=connect_timeout), None
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"no Dask scheduler at {address} ({SCHEDULER_ENV} or --scheduler): {exc}") from None
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise SweepError(f"workers must be a positive integer, not {workers!r}")
    # The fork server's environment is this process's when the server started
    # (the first sweep): the nannies give each worker this process's
    # environment of now, as a spawned worker would inherit it.
    env = {"env": dict(os.environ)} if processes else {}
    # No dashboard; the scheduler's remaining HTTP routes (health, metrics) on a
    # free port, since the default 8787 is taken whenever another cluster runs
    # on the machine (another sweep, another engineer's), and each sweep warned.
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                           dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                           silence_logs=logging.CRITICAL, **env)
    return Client(cluster), cluster


def run_sweep(fn: Callable, tasks: Sequence[tuple[str, tuple]], *, workers: int = 2,
              scheduler: str | None = None, desc: str = "sweep", progress: bool = True,
              on_result: Callable[[TaskResult], None] | None = None,
              info: dict | None = None, connect_timeout: str = "20s",
              processes: bool = True) -> list[TaskResult]:
    """Run ``fn(*args)`` for every ``(task_id, args)`` of ``tasks``; return the
    results in the order of ``tasks``.

    ``fn`` must be a module-level function (workers import it by name) and
    its result picklable. Tasks are submitted in list order, so put the
    longest first. ``on_result`` is called in completion order (progress
    lines); the returned list never depends on that order. ``info``, if
    given, receives ``workers`` (how many the cluster had) and ``scheduler``
    (its address, or ``local``). ``processes=False`` makes the local workers
    threads of this process, for tasks that wait on a tool's subprocess
    (nextpnr) rather than compute in Python: no interpreter per worker, and
    the tasks see this process's state; a scheduler's workers are processes
    whatever this says.
    """
    import dask
    import distributed  # noqa: F401  first: it adds the distributed.* defaults that config.set keys into

    ids = [task_id for task_id, _ in tasks]
    if len(set(ids)) != len(ids):
        raise SweepError("task ids must be unique")
    if not tasks:
        return []
    with dask.config.set(_local_config()):
        if processes:
            _preload(fn)
        client, cluster = _client(workers, scheduler, connect_timeout, processes)
        try:
            return _gather(client, cluster, fn, tasks, ids, desc, progress, on_result, info)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _gather(client, cluster, fn, tasks, ids, desc, progress, on_result, info):
    """Submit every task in list order; collect the results in that order."""
    from distributed import as_completed

    if info is not None:
        info["workers"] = len(client.scheduler_info().get("workers", {}))
        info["scheduler"] = "local" if cluster is not None else client.scheduler.address
    futures = {}
    for index, (task_id, args) in enumerate(tasks):
        # pure=False: a task is run even if an identical one ran before.
        fut = client.submit(_timed_call, fn, task_id, tuple(args), key=f"{desc}-{index}-{task_id}",
                            pure=False)
        futures[fut] = index
    results: list[TaskResult | None] = [None] * len(tasks)
    bar = _progress(len(tasks), desc) if progress else None
    for fut in as_completed(list(futures)):
        index = futures[fut]
        try:
            res = fut.result()
        except Exception as exc:  # e.g. KilledWorker: the task killed every worker it ran on
            res = TaskResult(ids[index], error=f"{type(exc).__name__}: {exc}")
        results[index] = res
        if on_result is not None:
            on_result(res)
        if bar is not None:
            bar.set_postfix_str(res.task_id if res.ok else f"{res.task_id} FAILED")
            bar.update()
    if bar is not None:
        bar.close()
    return results


def _progress(total, desc):
    from tqdm import tqdm
    return tqdm(total=total, unit="task", desc=desc, file=sys.stderr)

