#!/usr/bin/env python3
"""Check the built-in GUI tasks in headless Chromium, the way the environment runs them.

For every task folder (or the ids given on the command line) it runs three episodes, each in
a fresh WebDriver session: no action (the check must be falsy), solution.json (truthy) and
wrong.json (falsy). The pages are served from this folder by a ThreadingHTTPServer on
127.0.0.1; actions are carried out with W3C actions exactly as the environment does (see
README.md). Python 3.11 standard library only.

    python3 envs/gui/tasks/check.py                 # all tasks
    python3 envs/gui/tasks/check.py signup-form -r 2  # one task, twice
    python3 envs/gui/tasks/check.py --keep-open     # keep the server up afterwards

Exit status 1 when any run gives the wrong result.
"""

import argparse
import functools
import http.server
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH, HEIGHT = 1000, 800
GRID = 999

KEYS = {
    "enter": "\ue007", "return": "\ue007", "tab": "\ue004", "backspace": "\ue003",
    "delete": "\ue017", "escape": "\ue00c", "esc": "\ue00c", "space": " ",
    "up": "\ue013", "down": "\ue015", "left": "\ue012", "right": "\ue014",
    "home": "\ue011", "end": "\ue010", "pageup": "\ue00e", "pagedown": "\ue00f",
    "ctrl": "\ue009", "control": "\ue009", "shift": "\ue008", "alt": "\ue00a",
    "meta": "\ue03d", "cmd": "\ue03d", "super": "\ue03d",
}
for _i in range(1, 13):
    KEYS[f"f{_i}"] = chr(0xE031 + _i - 1)

CHROME_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
    f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1",
]


def to_px(coord):
    """Grid (0..999) to viewport CSS pixels."""
    x, y = coord
    return (round(x * (WIDTH - 1) / GRID), round(y * (HEIGHT - 1) / GRID))


def key_value(name):
    low = name.lower()
    if low in KEYS:
        return KEYS[low]
    if len(name) == 1:
        return name
    raise ValueError(f"unknown key name {name!r}")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise RuntimeError(f"{method} {path}: {e.code} {detail[:300]}") from None


class Session:
    def __init__(self, driver):
        self.d = driver
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": CHROME_ARGS},
        }}}
        self.id = driver.call("POST", "/session", caps)["sessionId"]
        self.p = f"/session/{self.id}"
        self.d.call("POST", self.p + "/goog/cdp/execute", {
            "cmd": "Emulation.setDeviceMetricsOverride",
            "params": {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                       "mobile": False}})
        self.pos = (0, 0)

    def close(self):
        try:
            self.d.call("DELETE", self.p)
        except Exception:
            pass

    def goto(self, url):
        self.d.call("POST", self.p + "/url", {"url": url})

    def js(self, script):
        return self.d.call("POST", self.p + "/execute/sync", {"script": script, "args": []})

    def wait_loaded(self, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                if self.js("return document.readyState;") == "complete":
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)

    def check(self, expr):
        try:
            return bool(self.js(f"return ({expr});"))
        except RuntimeError:
            return False

    # --- actions -------------------------------------------------------------------------
    def _perform(self, sources):
        self.d.call("POST", self.p + "/actions", {"actions": sources})

    def _pointer(self, acts):
        self._perform([{"type": "pointer", "id": "mouse",
                        "parameters": {"pointerType": "mouse"}, "actions": acts}])

    @staticmethod
    def _move(p, duration=0):
        return {"type": "pointerMove", "duration": duration, "origin": "viewport",
                "x": p[0], "y": p[1]}

    def _keys(self, acts):
        self._perform([{"type": "key", "id": "keyboard", "actions": acts}])

    def act(self, a):
        kind = a["action"]
        if kind in ("left_click", "right_click", "middle_click", "double_click",
                    "triple_click", "mouse_move"):
            p = to_px(a["coordinate"]) if "coordinate" in a else self.pos
            button = {"right_click": 2, "middle_click": 1}.get(kind, 0)
            clicks = {"double_click": 2, "triple_click": 3, "mouse_move": 0}.get(kind, 1)
            acts = [self._move(p)]
            for _ in range(clicks):
                acts += [{"type": "pointerDown", "button": button},
                         {"type": "pointerUp", "button": button}]
            self._pointer(acts)
            self.pos = p
        elif kind == "left_click_drag":
            start, end = self.pos, to_px(a["coordinate"])
            acts = [self._move(start), {"type": "pointerDown", "button": 0}]
            for i in range(1, 11):
                x = round(start[0] + (end[0] - start[0]) * i / 10)
                y = round(start[1] + (end[1] - start[1]) * i / 10)
                acts.append(self._move((x, y), 30))
            acts.append({"type": "pointerUp", "button": 0})
            self._pointer(acts)
            self.pos = end
        elif kind == "type":
            acts = []
            for ch in a["text"]:
                acts += [{"type": "keyDown", "value": ch}, {"type": "keyUp", "value": ch}]
            self._keys(acts)
        elif kind == "key":
            vals = [key_value(k) for k in a["keys"]]
            self._keys([{"type": "keyDown", "value": v} for v in vals]
                       + [{"type": "keyUp", "value": v} for v in reversed(vals)])
        elif kind in ("scroll", "hscroll"):
            p = to_px(a["coordinate"]) if "coordinate" in a else self.pos
            n = int(a["pixels"])
            dx, dy = (n * 100, 0) if kind == "hscroll" else (0, -n * 100)
            self._perform([{"type": "wheel", "id": "wheel", "actions": [
                {"type": "scroll", "x": p[0], "y": p[1], "deltaX": dx, "deltaY": dy,
                 "duration": 0, "origin": "viewport"}]}])
            self.pos = p
        elif kind == "wait":
            time.sleep(float(a.get("time", 1)))
        elif kind == "terminate":
            pass
        else:
            raise ValueError(f"unknown action {kind!r}")


def load_task(tid):
    folder = os.path.join(HERE, tid)
    with open(os.path.join(folder, "task.toml"), "rb") as f:
        meta = tomllib.load(f)
    for key in ("instruction", "split", "start", "check", "max_steps", "category"):
        if key not in meta:
            raise ValueError(f"{tid}: task.toml lacks {key}")
    assert meta["split"] in ("train", "test"), tid
    assert meta["category"] in ("form", "settings", "list", "flow", "drag", "other"), tid
    assert 10 <= meta["max_steps"] <= 25, tid
    runs = {}
    for name in ("solution", "wrong"):
        with open(os.path.join(folder, f"{name}.json")) as f:
            runs[name] = json.load(f)
        steps = sum(1 for a in runs[name] if a["action"] != "terminate")
        assert steps <= meta["max_steps"], f"{tid}: {name} has {steps} steps"
    return meta, runs


def run_episode(driver, url, meta, actions, settle):
    s = Session(driver)
    try:
        s.goto(url)
        w, h, dpr = s.js("return [window.innerWidth, window.innerHeight, "
                         "window.devicePixelRatio];")
        if (w, h, dpr) != (WIDTH, HEIGHT, 1):
            raise RuntimeError(f"viewport is {w}x{h} at {dpr}, not {WIDTH}x{HEIGHT} at 1")
        time.sleep(settle)
        for a in actions:
            s.act(a)
            if a["action"] == "terminate":
                break
            # A click may start a navigation a moment after the actions request returns: wait a
            # little, then until the (possibly new) page has loaded, as the environment does
            # before its screenshot.
            time.sleep(settle)
            s.wait_loaded()
        return s.check(meta["check"])
    finally:
        s.close()


def task_ids():
    return sorted(d for d in os.listdir(HERE)
                  if os.path.isfile(os.path.join(HERE, d, "task.toml")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ids", nargs="*", help="task ids (default: all)")
    ap.add_argument("-r", "--repeat", type=int, default=1, help="run every task N times")
    ap.add_argument("--settle", type=float, default=0.15,
                    help="seconds to wait after each action before waiting for the page load")
    ap.add_argument("--keep-open", action="store_true",
                    help="keep the HTTP server running afterwards (Ctrl-C ends it)")
    args = ap.parse_args()

    ids = args.ids or task_ids()
    handler = functools.partial(Quiet, directory=HERE)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    web = f"http://127.0.0.1:{server.server_address[1]}"

    port = free_port()
    cd = subprocess.Popen(["/usr/bin/chromedriver", f"--port={port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = Driver(f"http://127.0.0.1:{port}")
    for _ in range(100):
        try:
            if driver.call("GET", "/status", timeout=2).get("ready"):
                break
        except Exception:
            pass
        time.sleep(0.1)

    started = time.time()
    bad = 0
    rows = []
    print(f"{'task':32} {'split':6} {'none':6} {'right':6} {'wrong':6}")
    try:
        for tid in ids:
            meta, runs = load_task(tid)
            url = f"{web}/{tid}/{meta['start']}"
            for rep in range(args.repeat):
                cells = []
                for name, acts, want in (("none", [], False),
                                         ("right", runs["solution"], True),
                                         ("wrong", runs["wrong"], False)):
                    try:
                        got = run_episode(driver, url, meta, acts, args.settle)
                        ok = got == want
                        cells.append(("ok" if ok else "FAIL") + ("" if ok else f"({int(got)})"))
                    except Exception as e:  # noqa: BLE001
                        ok = False
                        cells.append("ERROR")
                        print(f"  {tid} {name}: {e}", file=sys.stderr)
                    bad += not ok
                row = f"{tid:32} {meta['split']:6} " + " ".join(f"{c:6}" for c in cells)
                rows.append(row)
                print(row, flush=True)
    finally:
        elapsed = time.time() - started
        print(f"{len(rows)} task runs, {bad} mismatches, {elapsed:.1f} s")
        cd.terminate()
        try:
            cd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cd.kill()
    if args.keep_open:
        print(f"serving {HERE} at {web}/ (Ctrl-C to stop)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    server.shutdown()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
