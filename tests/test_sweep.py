"""The sweep layer (kvfabric/sweep.py, issue #29): results in task order
whatever the workers and completion order, failures reported per task, and a
worker killed mid-task changing nothing."""

import os
import random
import signal

import pytest

from kvfabric.sweep import SweepError, run_sweep

from sweep_tasks import environ_get, os_getpid, seeded_draw, square_after, square_recording_pid, worker_settings


def _tasks(n, seed):
    rng = random.Random(seed)
    print(f"seed={seed}")
    # Random durations, so tasks finish in an order unlike the list's.
    return [(f"t{i}", (i, rng.choice([0.0, 0.05, 0.2]))) for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_results_come_in_task_order_whatever_the_workers(workers):
    info = {}
    res = run_sweep(square_after, _tasks(10, seed=5), workers=workers, progress=False, info=info)
    assert [r.task_id for r in res] == [f"t{i}" for i in range(10)]
    assert [r.value for r in res] == [i * i for i in range(10)]
    assert all(r.ok and r.wall_s >= 0 and r.cpu_s >= 0 for r in res)
    assert info == {"workers": workers, "scheduler": "local"}


def test_tasks_seeded_from_their_ids_give_the_same_values_on_any_cluster():
    tasks = [(f"seed-{i}", (f"seed-{i}",)) for i in range(6)]
    one = run_sweep(seeded_draw, tasks, workers=1, progress=False)
    two = run_sweep(seeded_draw, list(reversed(tasks)), workers=2, progress=False)
    assert {r.task_id: r.value for r in one} == {r.task_id: r.value for r in two}


def test_a_failing_task_is_reported_with_its_id_and_the_others_still_run():
    tasks = [(f"x{i}", (i, 0.0)) for i in (11, 12, 13, 14)]
    res = run_sweep(square_after, tasks, workers=2, progress=False)
    assert [r.ok for r in res] == [True, True, False, True]
    assert res[2].task_id == "x13" and "ValueError: thirteen is unlucky" in res[2].error
    assert [r.value for r in res if r.ok] == [121, 144, 196]


def test_a_worker_killed_mid_task_changes_no_result():
    """Two workers under nannies; when the first (short) task returns, the
    worker still busy with a long one is killed. The scheduler reruns its task
    on a worker (the restarted one or the other), and the results equal the
    ones of an undisturbed sweep."""
    from distributed import Client, LocalCluster

    tasks = [("short", (2, 0.2))] + [(f"long{i}", (i, 1.5)) for i in range(3, 7)]
    expected = [4, 9, 16, 25, 36]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as killer:
        pids = killer.run(os.getpid)   # worker address -> its process
        killed = []

        def kill_the_busy_worker(first):
            if killed:
                return
            busy = [w for w in pids if w != first.worker]
            for w in busy:
                os.kill(pids[w], signal.SIGKILL)   # as a crash or an OOM kill would
            killed.extend(busy)

        res = run_sweep(square_after, tasks, scheduler=cluster.scheduler_address, progress=False,
                        on_result=kill_the_busy_worker)
    assert killed, "no worker was killed"
    assert [r.value for r in res] == expected and all(r.ok for r in res)
    # The killed worker never reported a result: its task ran again elsewhere.
    assert not {r.worker for r in res} & set(killed)


def test_a_worker_of_the_sweeps_own_cluster_killed_mid_task_changes_no_result(tmp_path):
    """The same fault on run_sweep's own LocalCluster, whose workers are forked
    from a fork server and restarted by their nannies under the sweep's
    settings: when the short task returns, the worker running a long one is
    killed; every result still equals the undisturbed sweep's, and the task
    that was killed finished in another process."""
    tasks = [("short", ("short", 2, 0.2, str(tmp_path)))] + \
        [(f"long{i}", (f"long{i}", i, 1.5, str(tmp_path))) for i in range(3, 7)]
    killed = []

    def kill_the_busy_worker(first):
        if killed:
            return
        mine = (tmp_path / first.task_id).read_text()
        for f in tmp_path.iterdir():
            pid = f.read_text()
            if f.name != first.task_id and pid != mine:
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
                return

    res = run_sweep(square_recording_pid, tasks, workers=2, progress=False, on_result=kill_the_busy_worker)
    assert killed, "no worker was killed"
    assert [r.value for r in res] == [4, 9, 16, 25, 36] and all(r.ok for r in res)
    assert killed[0] not in {f.read_text() for f in tmp_path.iterdir()}


def test_workers_see_the_environment_of_when_the_sweep_starts(monkeypatch):
    """Workers fork from a fork server started by the process's first sweep;
    a variable set after it still reaches the next sweep's workers."""
    run_sweep(environ_get, [("first", ("KVFABRIC_TEST_LATE",))], workers=1, progress=False)
    monkeypatch.setenv("KVFABRIC_TEST_LATE", "set later")
    res = run_sweep(environ_get, [(f"w{i}", ("KVFABRIC_TEST_LATE",)) for i in range(2)], workers=2, progress=False)
    assert [r.value for r in res] == ["set later", "set later"]


def test_thread_workers_run_in_this_process():
    """processes=False (tasks that wait on a tool's subprocess): same results
    in task order, and the tasks ran in this process."""
    res = run_sweep(square_after, _tasks(6, seed=7), workers=2, progress=False, processes=False)
    assert [r.value for r in res] == [i * i for i in range(6)]
    pids = run_sweep(os_getpid, [("a", ()), ("b", ())], workers=2, progress=False, processes=False)
    assert {r.value for r in pids} == {os.getpid()}


def test_local_workers_are_forked_from_a_fork_server_with_the_sweeps_settings():
    """The overhead settings (kvfabric.sweep._local_config) reach the workers,
    which are forked by the fork server, not spawned by this process."""
    from kvfabric.sweep import _local_config

    keys = sorted(_local_config())
    res = run_sweep(worker_settings, [(f"w{i}", (keys,)) for i in range(2)], workers=2, progress=False)
    for r in res:
        values, parent = r.value
        assert dict(zip(keys, values)) == _local_config()
        assert parent != os.getpid()
    assert _local_config()["distributed.worker.multiprocessing-method"] == "forkserver"
    assert _local_config()["distributed.worker.profile.enabled"] is False


def test_no_scheduler_at_the_address_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("KVFABRIC_SCHEDULER", "tcp://127.0.0.1:9")
    with pytest.raises(SweepError, match=r"no Dask scheduler at tcp://127.0.0.1:9 \(KVFABRIC_SCHEDULER"):
        run_sweep(square_after, [("a", (1, 0.0))], progress=False, connect_timeout="2s")
