#!/usr/bin/env python3
"""Time to first token of an OpenClaw conversation's requests, replayed against `serve`.

Usage: openclaw_ttft.py HOST_BINARY MODEL_DIR [REQUESTS_JSON] [--prefix-cache-mb N ...]
                        [--transformers PYTHON]

REQUESTS_JSON holds `{requests: [...]}`: chat-completions bodies one agent conversation sent,
in order (default: ../shared/data/openclaw-session.json, three requests of about 12,000 Qwen3
tokens each, recorded from the OpenClaw agent). Each body is sent as recorded except that it
asks for one token without streaming, so the request's latency is its time to first token.
The server is started once per `--prefix-cache-mb` value (default: 512 and 0), so the turns
with and without the prefix cache are measured in one run on one machine.

With `--transformers PYTHON` the cold first turn is also timed in transformers (`torch_prefill.py`
run by PYTHON, which needs torch and transformers) on the same model, request and two threads,
and both are printed with their ratio (best of three each, template and tokenizer included).
"""
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def replay(binary, model, requests, cache_mb, workdir, repeat_first=1):
    port = free_port()
    server = subprocess.Popen(
        [binary, "serve", "--model-path", model, "--port", str(port),
         "--prefix-cache-mb", str(cache_mb), "--rl-buffer-dir", os.path.join(workdir, f"buf-{cache_mb}")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                time.sleep(0.1)
        times = []
        for body in [requests[0]] * (repeat_first - 1) + requests:
            body = dict(body, stream=False, max_completion_tokens=1)
            body.pop("stream_options", None)
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                data=json.dumps(body).encode(), headers={"content-type": "application/json"})
            t = time.perf_counter()
            answer = json.loads(urllib.request.urlopen(req, timeout=3600).read())
            times.append((time.perf_counter() - t, answer["usage"]["prompt_tokens"]))
        return times
    finally:
        server.terminate()
        server.wait()


def main():
    args = sys.argv[1:]
    caches = []
    while "--prefix-cache-mb" in args:
        i = args.index("--prefix-cache-mb")
        caches.append(int(args[i + 1]))
        del args[i:i + 2]
    python = None
    if "--transformers" in args:
        i = args.index("--transformers")
        python = args[i + 1]
        del args[i:i + 2]
    caches = caches or [1024, 0]
    binary, model = args[0], args[1]
    path = args[2] if len(args) > 2 else os.path.join(
        os.path.dirname(__file__), "../../../../shared/data/openclaw-session.json")
    requests = json.load(open(path))["requests"]
    workdir = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"openclaw-ttft-{os.getpid()}")
    os.makedirs(workdir, exist_ok=True)
    print(f"cpu: {cpu_name()}, {os.cpu_count()} threads; model: {model}; requests: {path}")
    for mb in caches:
        times = replay(binary, model, requests, mb, workdir)
        first = times[0][0]
        cells = ", ".join(f"turn {i + 1}: {t:.2f} s ({n} tokens, {t / first:.3f}x turn 1)"
                          for i, (t, n) in enumerate(times))
        print(f"prefix cache {mb} MiB: {cells}")
    if python:
        ours = replay(binary, model, requests[:1], 0, workdir, repeat_first=3)
        best = min(t for t, _ in ours)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_prefill.py")
        out = subprocess.run([python, script, model, path, "2"], check=True,
                             capture_output=True, text=True).stdout
        theirs = json.loads(out.strip().splitlines()[-1])
        print(f"cold first turn, best of 3: openclaw-host {best:.2f} s ({ours[0][1]} tokens); "
              f"transformers {theirs['seconds']:.2f} s ({theirs['prompt_tokens']} tokens, "
              f"torch {theirs['torch']}, {theirs['attention']} attention); "
              f"speed ratio openclaw/transformers {theirs['seconds'] / best:.2f}x")


if __name__ == "__main__":
    main()
