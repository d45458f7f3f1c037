"""Where a study's cells run: a local process pool (``concurrent.futures``) or a Ray cluster.

Both take the cells that are not cached and yield ``(cell, row)`` as cells finish; both run the same
``cells.run_cell``, so a study gives the same table on either. Payloads (model bytes, frames) go to
each pool worker once (its initializer) and into Ray's object store once (``ray.put``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from ..ir import TidlxError
from .cells import Cell, Payload, install_payloads, run_cell

#: ``--ray local``: start a Ray instance on this machine.
RAY_LOCAL = "local"


class SweepBackendError(TidlxError):
    """The pool or the Ray cluster cannot be used (Ray missing, no cluster at the address, ...)."""


def default_jobs() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def failed_row(exc: BaseException, what: str) -> Dict:
    return {"error": f"{what}: {type(exc).__name__}: {exc}", "warnings": None, "_cacheable": False}


def _context():
    """fork when this process runs no other thread (workers start with tidlx imported, at once);
    else a fork server that imports tidlx once (forking a threaded process can deadlock)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["tidlx.studies.cells"])
        return ctx
    return multiprocessing.get_context("spawn")


def run_local(cells: List[Cell], payloads: Mapping[str, Payload], jobs: int) -> Iterator[Tuple[Cell, Dict]]:
    """Each cell in a pool of ``jobs`` worker processes."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if not cells:
        return
    pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(cells))), mp_context=_context(),
                               initializer=install_payloads, initargs=(dict(payloads),))
    try:
        futures = {pool.submit(run_cell, cell): cell for cell in cells}
        for future in as_completed(futures):
            cell = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # the worker died (killed, out of memory): the row says so
                row = failed_row(exc, "the worker process failed")
            yield cell, row
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _ray_cell(cell: Cell, *payloads: Optional[Payload]) -> Dict:
    """A Ray task: the payloads arrive from the object store as arguments."""
    return run_cell(cell, {p.key: p for p in payloads if p is not None})


def ray_address(ray: Optional[str]) -> Optional[str]:
    """The Ray cluster a sweep uses: ``ray`` (an address, ``auto`` or ``local``), else ``RAY_ADDRESS``, else
    None (the local pool)."""
    if ray is not None:
        if not isinstance(ray, str) or not ray.strip():
            raise SweepBackendError(f"ray must be a cluster address, 'auto' or '{RAY_LOCAL}', got {ray!r}")
        return ray.strip()
    return os.environ.get("RAY_ADDRESS") or None


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) address that nothing answers is an error at once: Ray itself
    retries for minutes. ``auto`` and other forms are left to Ray."""
    import socket

    text = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SweepBackendError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
                                f"(ray start --head) or use --ray local") from None


def run_ray(cells: List[Cell], payloads: Mapping[str, Payload], jobs: Optional[int],
            address: str) -> Iterator[Tuple[Cell, Dict]]:
    """Each cell a Ray task named after it; a Ray instance already started in this process is used as
    it is, else Ray connects to ``address`` (``local``: starts one with ``jobs`` CPUs) and stops after."""
    import logging

    try:
        import ray
    except ImportError:
        raise SweepBackendError("--ray needs Ray (pip install ray); without --ray the study runs on a local "
                                "process pool") from None
    if not cells:
        return
    started = False
    if not ray.is_initialized():
        kwargs = dict(logging_level=logging.WARNING, log_to_driver=False)
        try:
            if address == RAY_LOCAL:
                ray.init(num_cpus=jobs, **kwargs)
            else:
                _check_reachable(address)
                ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SweepBackendError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
        started = True
    try:
        refs = {key: ray.put(payload) for key, payload in payloads.items()}
        task = ray.remote(num_cpus=1, max_retries=1)(_ray_cell)
        pending = {}
        for cell in cells:
            args = [refs.get(k) for k in (cell.model_key, cell.params_key, cell.calib_key)]
            pending[task.options(name=cell.name).remote(cell, *args)] = cell
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                cell = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except Exception as exc:  # the worker died or the task was lost
                    row = failed_row(exc, "the Ray task failed")
                yield cell, row
    finally:
        if started:
            ray.shutdown()
