"""Starts a real ``turnledger serve`` for the tests.

The binary is $TURNLEDGER_BIN, else it is built once per test run with
``go build`` from the repository root into a temporary directory. Each Serve
listens on a kernel-assigned loopback port with its own data directory and a
random admin token, and is killed by close().
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Optional

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import turnledger  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_bin_lock = threading.Lock()
_bin: Optional[str] = None


def binary() -> str:
    global _bin
    with _bin_lock:
        if _bin:
            return _bin
        env = os.environ.get("TURNLEDGER_BIN")
        if env:
            _bin = env
            return env
        d = tempfile.mkdtemp(prefix="turnledger-bin-")
        atexit.register(shutil.rmtree, d, True)
        out = os.path.join(d, "turnledger")
        subprocess.run(["go", "build", "-o", out, "./cmd/turnledger"], cwd=REPO, check=True)
        _bin = out
        return out


class Serve:
    def __init__(self, *args: str) -> None:
        self.data = tempfile.mkdtemp(prefix="turnledger-py-")
        self.admin_token = secrets.token_hex(16)
        env = dict(os.environ, TURNLEDGER_ADMIN_TOKEN=self.admin_token)
        self.proc = subprocess.Popen(
            [binary(), "serve", "--addr", "127.0.0.1:0", "--data", self.data, "--sync", "interval",
             "--log-level", "warn", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
        )
        self.url = ""
        deadline = time.monotonic() + 30
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            self.close()
            raise RuntimeError("turnledger serve did not start")
        # Drain stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        try:
            for _ in self.proc.stdout:  # type: ignore[union-attr]
                pass
        except (ValueError, OSError):
            pass

    # The helpers' clients retry a 503 or a lost answer after its Retry-After
    # (with a key): a loaded CI machine may make the ledger answer 503 once.
    # A client given a fault-injecting transport retries nothing itself, so
    # the test sees what the worker does.

    def admin(self, **kw: Any) -> turnledger.Client:
        kw.setdefault("retries", 3)
        return turnledger.Client(self.url, admin_token=self.admin_token, **kw)

    def agent(self, project: str, agent: str, capacity: int = 1, grants: tuple[str, ...] = (),
              transport: Optional[Callable[..., Any]] = None, **kw: Any) -> turnledger.Client:
        """Registers an agent, issues it a credential, returns a client as it."""
        adm = self.admin()
        adm.register_agent(agent, project=project, capacity=capacity, capabilities=["summarize"], grants=grants)
        cred = adm.issue_credential(agent, project=project)
        kw.setdefault("retries", 0 if transport else 3)
        return turnledger.Client(self.url, project=project, agent=agent, token=cred["token"], transport=transport, **kw)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.data, ignore_errors=True)


def until(what: str, cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """Waits for cond, polling; fails with what after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def dispatch(c: turnledger.Client, target: str, key: str, **kw: Any) -> turnledger.types.Turn:
    return c.dispatch_turn(target, "summarize", key, input={"text": key}, **kw)


def outcome(c: turnledger.Client, turn_id: str) -> Optional[str]:
    return c.get_turn(turn_id)["outcome"]


def events(c: turnledger.Client, turn_id: str) -> list[str]:
    return [it["type"] for it in c.turn_feed(turn_id, limit=500)["items"]]
