#!/usr/bin/env python3
"""HTTP server micro-benchmark for reginamq: push-shaped and pop-shaped requests.

Starts each candidate server (1 worker, 127.0.0.1, uvloop) as a subprocess, drives it
with wrk (Debian package `wrk`) for a bounded time, and reports requests/s plus the
server process tree's CPU seconds (user+system, via psutil) over the measured window,
i.e. requests per server CPU-second -- the fairest figure on a 2-core box where the
load generator competes for CPU.

By default the server is pinned to CPU 0 and wrk to CPU 1 (taskset via
os.sched_setaffinity), so they don't fight over one core; use --no-pin to disable.

Usage (from repo root):
    apt-get install -y wrk      # once
    /tmp/venv/bin/python benchmarks/http_servers/run.py
    /tmp/venv/bin/python benchmarks/http_servers/run.py --duration 10 --warmup 2 \
        --connections 32 --rounds 2 --servers granian-asgi,granian-rsgi,uvicorn,aiohttp
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
PY = sys.executable
BIN = Path(PY).parent

SHAPES = {
    "push": ("POST", "/api/v1/push", 201),
    "pop": ("GET", "/api/v1/pop/queue/q?batch=100", 200),
}


def server_cmd(name: str, port: int) -> list[str]:
    common_granian = [
        str(BIN / "granian"), "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1", "--loop", "uvloop", "--http", "1", "--no-ws",
        "--log-level", "warning",
    ]
    if name == "granian-asgi":
        return [*common_granian, "--interface", "asgi", "apps:asgi_app"]
    if name == "granian-rsgi":
        return [*common_granian, "--interface", "rsgi", "apps:rsgi_app"]
    if name == "uvicorn":
        return [
            str(BIN / "uvicorn"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1", "--loop", "uvloop", "--http", "httptools",
            "--no-access-log", "--log-level", "warning", "--ws", "none",
            "--lifespan", "on", "apps:asgi_app",
        ]
    if name == "aiohttp":
        return [PY, str(Path(__file__).resolve()), "--serve-aiohttp", str(port)]
    raise SystemExit(f"unknown server {name}")


def serve_aiohttp(port: int) -> None:
    import uvloop
    from aiohttp import web

    sys.path.insert(0, str(HERE))
    from apps import make_aiohttp_app

    uvloop.install()
    web.run_app(make_aiohttp_app(), host="127.0.0.1", port=port,
                access_log=None, print=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early rc={proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start in time")


def check_responses(port: int, push_body: bytes) -> None:
    """Sanity-check both routes before loading them."""
    for shape, (method, path, want) in SHAPES.items():
        data = push_body if method == "POST" else None
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            body = r.read()
            if r.status != want or not body.startswith((b"[", b"{")):
                raise RuntimeError(f"{shape}: status {r.status}, body {body[:80]!r}")


def tree_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def run_wrk(url: str, seconds: float, conns: int, lua: str | None, cpu: int | None) -> dict:
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{int(seconds)}s", "--timeout", "5s"]
    if lua:
        cmd += ["-s", lua]
    cmd.append(url)
    preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30,
                         preexec_fn=preexec).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:(.*)", out)
    lat = re.search(r"Latency\s+([\d.]+\w+)", out)
    return {
        "rps": float(m.group(1)) if m else 0.0,
        "requests": int(total.group(1)) if total else 0,
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
        "errors": errs.group(1).strip() if errs else "",
        "lat_avg": lat.group(1) if lat else "?",
        "raw": out,
    }


def bench_server(name: str, args, push_file: str, lua: str) -> dict[str, dict]:
    port = free_port()
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    preexec = (lambda: os.sched_setaffinity(0, {0})) if pin else None
    proc = subprocess.Popen(server_cmd(name, port), cwd=str(HERE), preexec_fn=preexec,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    results: dict[str, dict] = {}
    try:
        wait_ready(port, proc)
        time.sleep(0.5)  # let workers finish booting
        check_responses(port, Path(push_file).read_bytes())
        ps = psutil.Process(proc.pid)
        for shape, (method, path, _) in SHAPES.items():
            url = f"http://127.0.0.1:{port}{path}"
            script = lua if method == "POST" else None
            wrk_cpu = 1 if pin else None
            run_wrk(url, args.warmup, args.connections, script, wrk_cpu)
            c0 = tree_cpu(ps)
            r = run_wrk(url, args.duration, args.connections, script, wrk_cpu)
            r["server_cpu_s"] = tree_cpu(ps) - c0
            r["req_per_cpu_s"] = r["requests"] / r["server_cpu_s"] if r["server_cpu_s"] > 0 else 0.0
            results[shape] = r
            if r["non2xx"] or r["errors"]:
                print(f"  WARNING {name}/{shape}: non2xx={r['non2xx']} errors={r['errors']}",
                      file=sys.stderr)
            print(f"  {name:13s} {shape:4s} {r['rps']:9.0f} req/s  cpu {r['server_cpu_s']:5.2f}s "
                  f"-> {r['req_per_cpu_s']:7.0f} req/cpu-s  avg lat {r['lat_avg']}", flush=True)
    finally:
        # Stop only the process group we started.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="granian-asgi,granian-rsgi,uvicorn,aiohttp")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1, help="repeat all servers; report best round")
    ap.add_argument("--no-pin", action="store_true", help="don't pin server/wrk to separate CPUs")
    ap.add_argument("--serve-aiohttp", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.serve_aiohttp:
        serve_aiohttp(args.serve_aiohttp)
        return
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: apt-get install -y wrk")

    sys.path.insert(0, str(HERE))
    from apps import make_push_body

    tmp = tempfile.mkdtemp(prefix="reginamq-httpbench-")
    push_file = os.path.join(tmp, "push.json")
    Path(push_file).write_bytes(make_push_body())
    lua = os.path.join(tmp, "push.lua")
    Path(lua).write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'local f = io.open("{push_file}", "rb")\n'
        'wrk.body = f:read("*a")\n'
        'f:close()\n'
    )

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    best: dict[tuple[str, str], dict] = {}
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", flush=True)
        for name in servers:
            for shape, r in bench_server(name, args, push_file, lua).items():
                key = (name, shape)
                if key not in best or r["rps"] > best[key]["rps"]:
                    best[key] = r

    print()
    print("| server | shape | req/s | server CPU s | req per server CPU-s | avg latency |")
    print("|---|---|---:|---:|---:|---:|")
    for name in servers:
        for shape in SHAPES:
            r = best.get((name, shape))
            if r:
                print(f"| {name} | {shape} | {r['rps']:.0f} | {r['server_cpu_s']:.2f} | "
                      f"{r['req_per_cpu_s']:.0f} | {r['lat_avg']} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
