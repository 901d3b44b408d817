"""A fork server: worker processes that start in milliseconds and are still real OS processes.

A fresh interpreter imports redis, psycopg and the worker code once, then forks one
child per request. Each child has its own pid (a real SIGKILL kills exactly it), is
its own process-group leader, and has PR_SET_PDEATHSIG(SIGKILL) towards the server;
the server has the same towards the thread that started it, and on EOF on its stdin
(the orchestrator is gone) it SIGKILLs its children and exits. So no worker outlives
the orchestrator. multiprocessing's forkserver was not used because its children
re-import the parent's __main__ (under pytest that is all of pytest, ~150 ms each).

Protocol (JSON lines): request `{"id", "spec", "log"}` (and `"extensions"`: the guards,
faults, ... registered in the client process, made again in the child: chaos/extensions.py) -> reply `{"id", "pid"}` or
`{"id", "error"}`; whenever a child ends: `{"exit": pid, "code": n}` (n < 0: signal). A reply
always comes before its child's exit line: the client makes the Child as it reads the reply, so
every exit finds its Child. A spawn that gave up waiting (ForkServerError) leaves no child behind:
should the reply come later, its child is SIGKILLed as it is read. The server files each child
under its request's `group` (the run dir): `{"id", "end": group}` SIGKILLs and reaps what is left
of a run, whatever the client believes of it -> `{"id", "running": [[pid, name], ...]}` (those
that were still running).
A large spec (a producer's 10^5 events are about 15 MB) is written to a file next to the
worker's log and the request carries `spec_file` instead: the child reads it after the
fork, so the server neither parses it nor keeps its memory, and spawning stays a few ms.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from chaos import extensions
from chaos.workload.workerspec import WorkerSpec

try:  # about 10x faster than json on a producer's spec
    import orjson as _orjson
except ModuleNotFoundError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_PARENT_ENV = "CHAOS_FORKSERVER_PARENT"
SPEC_IN_FILE_BYTES = 1 << 16   # specs larger than this go through a file
# How long the client waits for the server's start and for a spawn's answer. A server that is
# gone is seen at once (its stdout ends); one that is alive but starved is waited out: in a
# whole-suite run beside two CPU hogs (load 20-27, every xdist worker starting its cells at once)
# a spawn's answer took longer than the 10 s this was, and its child was forked after the client
# had given up (the cell a RIG FAILURE). A server that never answers is still named after this.
PATIENCE_S = 30.0


def _dumps(obj: Any) -> bytes:
    if _orjson is not None:
        try:
            return _orjson.dumps(obj)
        except TypeError:  # what orjson refuses and json takes (non-str keys): json writes it
            pass
    return json.dumps(obj).encode()


def _loads(data: bytes) -> Any:
    return _orjson.loads(data) if _orjson is not None else json.loads(data)


def _load_spec(path: str) -> dict[str, Any]:
    """A spec the client wrote to a file (see the module doc); the file is removed once read."""
    with open(path, "rb") as fh:
        spec = _loads(fh.read())
    os.unlink(path)
    return spec


# ----------------------------------------------------------------------------- server side

def _child(request: dict[str, Any], log: str, server: int, server_fds: list[int]) -> None:
    code = 70
    try:
        from chaos.workload.procutil import die_with_parent
        from chaos.workload.worker import run
        die_with_parent(server)
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        # SIGUSR1 (drain) stays blocked, as inherited from the server, until WorkerEnv takes it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        for fd in server_fds:
            os.close(fd)
        for target, (path, flags) in enumerate([(os.devnull, os.O_RDONLY),
                                                (log, os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                                                (log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)]):
            fd = os.open(path, flags, 0o644)
            if fd != target:
                os.dup2(fd, target)
                os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        spec = request["spec"] if "spec" in request else _load_spec(request["spec_file"])
        if request.get("extensions"):
            from chaos import extensions as registered
            registered.replay(request["extensions"])
        code = int(run(spec) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the traceback goes to the worker's log
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """The server loop (runs in its own interpreter, started by ForkServer)."""
    import encodings.idna  # noqa: F401 - what every child imported at its first connect (~1.5 ms)
    import hmac  # noqa: F401
    import secrets  # noqa: F401

    import psycopg  # noqa: F401 - preloaded so children start warm
    import redis  # noqa: F401
    import redis.utils

    import chaos.cluster.sentinel_client  # noqa: F401 - every child's first link (WorkerEnv.new_redis)
    import chaos.workload.worker  # noqa: F401
    # redis-py reads its own version from the installed metadata at a process's first
    # connection (cached per process): ~7 ms of CPU in every child, once here instead
    redis.utils.get_lib_version()
    from chaos.workload.procutil import die_with_parent

    die_with_parent(int(os.environ[_PARENT_ENV]))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # Children inherit the mask from the fork on: a drain signal (SIGUSR1) sent in the window
    # between fork() and the child's own block would take its default action and kill it.
    # WorkerEnv unblocks it once its handler is in (chaos/workload/env.py).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    out = os.fdopen(sys.stdout.fileno(), "w", buffering=1, closefd=False)
    server_pid = os.getpid()
    out.write(json.dumps({"ready": server_pid}) + "\n")
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    children: dict[int, tuple[str, str]] = {}    # pid -> (group, name) of the request
    try:
        _serve_loop(sel, wake_r, out, server_pid, [0, sel.fileno(), wake_r, wake_w, out.fileno()], children)
    except KeyboardInterrupt:   # a terminal's Ctrl-C reaches the server too: its children go with it
        _end_children(children)
        raise


def _serve_loop(sel: selectors.BaseSelector, wake_r: int, out: Any, server_pid: int, server_fds: list[int],
                children: dict[int, tuple[str, str]]) -> None:
    buf = bytearray()
    while True:
        eof = False
        for key, _ in sel.select():
            if key.fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                continue
            data = os.read(0, 65536)
            if not data:
                eof = True
                break
            scanned = len(buf)
            buf += data   # (a bytearray grows in place; only the new bytes are searched)
            while (end := buf.find(b"\n", scanned)) >= 0:
                req = _loads(bytes(buf[:end]))
                del buf[:end + 1]
                scanned = 0
                if "end" in req:
                    running = _end_group(children, req["end"], out)
                    out.write(json.dumps({"id": req["id"], "running": running}) + "\n")
                    continue
                try:
                    pid = os.fork()
                except OSError as exc:
                    out.write(json.dumps({"id": req["id"], "error": str(exc)}) + "\n")
                    continue
                if pid == 0:
                    _child(req, req["log"], server_pid, server_fds)
                children[pid] = (req.get("group", ""), req.get("name", ""))
                out.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.pop(pid, None)
            out.write(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
        if eof:
            _end_children(children)
            return


def _end_group(children: dict[int, tuple[str, str]], group: str, out: Any) -> list[list[Any]]:
    """SIGKILL and reap every child started for `group` (a run), each exit line written; the
    [pid, name] of those that were still running (not zombies) when the end came."""
    from chaos.workload.procutil import process_state
    pids = [pid for pid, (g, _) in children.items() if g == group]
    running = []
    for pid in pids:
        if process_state(pid) not in ("Z", ""):
            running.append([pid, children[pid][1]])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            continue
        children.pop(pid, None)
        out.write(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
    return running


def _end_children(children: dict[int, tuple[str, str]]) -> None:
    """SIGKILL the children still running and reap them: a child left unreaped when the server
    exits is reparented to init and outlives the run as a zombie."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except (ChildProcessError, InterruptedError):
            pass
    children.clear()


# ----------------------------------------------------------------------------- client side

class ForkServerError(RuntimeError):
    """The fork server did not do what it was asked (gone, refused, or no answer in time)."""


class Child:
    """A worker started by the fork server: pid, exit code once it ended."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None
        self._ended = threading.Event()

    def alive(self) -> bool:
        return not self._ended.is_set()

    def wait(self, timeout: float | None = None) -> int | None:
        self._ended.wait(timeout)
        return self.exitcode

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


class ForkServer:
    """The client: start the server once, then `spawn(spec, log)` -> Child in a few ms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._replies: dict[int, dict] = {}
        self._reply_ready = threading.Condition(self._lock)
        self._children: dict[int, Child] = {}           # running, by pid
        self._abandoned: dict[int, Path | None] = {}    # request id -> its spec file: the client gave up
        self._proc: subprocess.Popen | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        # PDEATHSIG fires when the *thread* that forked the server exits: this thread lives
        # as long as the server (it reads the server's replies until EOF).
        threading.Thread(target=self._own_server, name="chaos-forkserver", daemon=True).start()
        self._started.wait(PATIENCE_S)
        if self._proc is None or not self.alive():
            raise RuntimeError(f"fork server did not start: {self._failure!r}")

    def _own_server(self) -> None:
        from chaos.workload.procutil import die_with_parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        env[_PARENT_ENV] = str(os.getpid())
        parent = os.getpid()
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "chaos.workload.forkserver"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                          preexec_fn=lambda: die_with_parent(parent), close_fds=True)
        except BaseException as exc:  # noqa: BLE001
            self._failure = exc
            self._started.set()
            return
        for line in self._proc.stdout:
            msg = json.loads(line)
            with self._lock:
                if "ready" in msg:
                    self._started.set()
                elif "exit" in msg:
                    child = self._children.pop(msg["exit"], None)
                    if child is not None:
                        child.exitcode = msg["code"]
                        child._ended.set()
                else:
                    self._answered(msg)
        self._started.set()
        with self._lock:  # the server is gone: so are its children
            for child in self._children.values():
                child.exitcode = child.exitcode if child.exitcode is not None else -signal.SIGKILL
                child._ended.set()
            self._children.clear()
            self._reply_ready.notify_all()

    def _answered(self, msg: dict) -> None:
        """A reply (under the lock). The child is registered here, where its pid is first known:
        the server writes a child's reply before it can reap it, so every exit line that follows
        finds its Child. A child whose spawn gave up waiting is SIGKILLed at once: nobody holds it."""
        rid = msg["id"]
        child = Child(msg["pid"]) if "pid" in msg else None
        if child is not None:
            self._children[child.pid] = child
        if rid in self._abandoned:
            spec_file = self._abandoned.pop(rid)
            if child is not None:
                child.kill(signal.SIGKILL)
            if spec_file is not None:
                spec_file.unlink(missing_ok=True)
            return
        self._replies[rid] = {"id": rid, "child": child} if child is not None else msg
        self._reply_ready.notify_all()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def spawn(self, spec: WorkerSpec | dict[str, Any], log: Path, timeout: float = PATIENCE_S) -> Child:
        """Start a worker; the server files it under its run dir (see `end`)."""
        spec = WorkerSpec.of(spec)   # the one contract: a dict is checked into a WorkerSpec here
        encoded = _dumps(spec.to_json())
        registered = extensions.records()   # guards, faults, ... registered here: the child makes them too
        with self._lock:
            self._next += 1
            rid = self._next
            spec_file = None
            if len(encoded) > SPEC_IN_FILE_BYTES:
                spec_file = Path(log).with_name(f"{Path(log).stem}.{rid}.spec.json")
                spec_file.parent.mkdir(parents=True, exist_ok=True)
                spec_file.write_bytes(encoded)
                head = {"id": rid, "group": spec.run_dir, "name": spec.name, "spec_file": str(spec_file),
                        "log": str(log)}
                request = _dumps({**head, "extensions": registered} if registered else head)
            else:
                more = b',"extensions":%s' % _dumps(registered) if registered else b""
                request = b'{"id":%d,"group":%s,"name":%s,"log":%s%s,"spec":%s}' % (
                    rid, _dumps(spec.run_dir), _dumps(spec.name), _dumps(str(log)), more, encoded)
            try:
                reply = self._ask(rid, request, timeout)
            except ForkServerError:
                if spec_file is not None:
                    if rid in self._abandoned:
                        self._abandoned[rid] = spec_file   # (removed when the late reply comes)
                    else:
                        spec_file.unlink(missing_ok=True)   # no child to read it
                raise
            if reply is None or "error" in reply:
                if spec_file is not None:
                    spec_file.unlink(missing_ok=True)
                raise ForkServerError(f"fork server could not start {spec.name}: "
                                      f"{reply and reply.get('error') or 'server is gone'}")
            return reply["child"]

    def end(self, group: str, timeout: float = PATIENCE_S) -> list[tuple[int, str]]:
        """SIGKILL and reap whatever the server still runs of `group` (a run dir), whatever this
        client believes of it; the (pid, name) of those that were still running. The server
        knows its children for sure: after this, none of the run's is left. A server that is
        gone took its children with it: []."""
        with self._lock:
            self._next += 1
            rid = self._next
            try:
                reply = self._ask(rid, _dumps({"id": rid, "end": group}), timeout)
            except ForkServerError:
                if self.alive():
                    raise
                return []
        return [] if reply is None else [(pid, name) for pid, name in reply["running"]]

    def _ask(self, rid: int, request: bytes, timeout: float) -> dict | None:
        """Send one request (the lock held) and wait for its reply; None: the server is gone.
        A request not answered within `timeout` is abandoned (ForkServerError): a child it
        makes later is SIGKILLed as its reply is read."""
        try:
            self._proc.stdin.write(request + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:   # the server is gone (its reader sees EOF)
            raise ForkServerError("fork server is gone") from None
        if not self._reply_ready.wait_for(lambda: rid in self._replies or not self.alive(), timeout):
            self._abandoned[rid] = None
            raise ForkServerError(f"fork server did not answer within {timeout} s")
        return self._replies.pop(rid, None)

    def close(self) -> None:
        """EOF to the server: it SIGKILLs what is left of its children and exits."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer:
    """The process-wide fork server, started on first use (about 0.3 s once)."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = ForkServer()
        return _server


def close_fork_server() -> None:
    """Stop the process-wide fork server now and reap it (a command ending must not leave it
    to exit after the orchestrator, on EOF, where it is reparented and shows up as left over)."""
    global _server
    with _server_lock:
        server, _server = _server, None
    if server is not None:
        server.close()


if __name__ == "__main__":
    try:
        serve()
    except KeyboardInterrupt:  # a terminal's Ctrl-C reaches the whole group: the orchestrator says so
        sys.exit(130)
