#!/usr/bin/env python3
"""Checks the built-in SWE instances and writes them as SWE-bench JSONL.

For every instance folder here (or the ids given) it builds the base commit from repo/ with a
fixed identity and fixed dates, so the hash is the same on every machine, then scores patches
against it the way the environment does: in a fresh clone of the base commit, apply the
candidate diff, then test.patch, then run FAIL_TO_PASS and PASS_TO_PASS by node id; the
instance is resolved only if every one of them passes.

Four checks per instance:
  before  test.patch alone: every FAIL_TO_PASS test fails, every PASS_TO_PASS test passes, and
          the tests collected are exactly FAIL_TO_PASS + PASS_TO_PASS
  gold    gold.patch + test.patch: resolved
  empty   an empty diff + test.patch: not resolved
  broken  gold.patch plus a generated change that makes the first source function run by the
          first PASS_TO_PASS test raise, + test.patch: not resolved (and that test fails)

Usage: /usr/bin/python3 check.py [ids...] [--write-jsonl FILE] [--skip-checks] [--jobs N]
Needs git and a python with pytest (--python, default: the one running this script).
Exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The base commit: one commit, no parent, this identity, these dates, this message. With the
# files' contents, names and modes (normalised to 100644) it fixes the hash.
IDENTITY_NAME = "openclaw"
IDENTITY_EMAIL = "swe-tasks@openclaw.invalid"
IDENTITY_DATE = "1704067200 +0000"  # 2024-01-01T00:00:00Z
BASE_MESSAGE = "Base commit"

COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git")
META_KEYS = {"instance_id", "repo", "FAIL_TO_PASS", "PASS_TO_PASS", "split"}
SPLITS = ("train", "test")
# --write-broken: keep each instance's breaking diff (broken.patch, broken.json) for the
# environment's own tests, which score it through the sandbox.
WRITE_BROKEN = False
BREAK_LINE = 'raise RuntimeError("deliberately broken by check.py")'

TRACE_PLUGIN = r'''
import json
import os
import sys

import pytest

_ROOT = os.path.realpath(os.environ["SWE_TRACE_ROOT"])
_OUT = os.environ["SWE_TRACE_OUT"]
_seen = []


def _is_test(rel):
    parts = rel.split(os.sep)
    name = parts[-1]
    return ("tests" in parts[:-1] or "test" in parts[:-1] or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if code.co_name.startswith("<") or not code.co_filename.endswith(".py"):
        return
    path = os.path.realpath(os.path.abspath(code.co_filename))
    if not path.startswith(_ROOT + os.sep):
        return
    rel = os.path.relpath(path, _ROOT)
    if _is_test(rel):
        return
    key = [rel, code.co_firstlineno, code.co_name]
    if key not in _seen:
        _seen.append(key)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    sys.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def pytest_unconfigure(config):
    with open(_OUT, "w") as f:
        json.dump(_seen, f)
'''


class CheckError(Exception):
    pass


def git_env() -> dict:
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("GIT_"):
            del env[key]
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": IDENTITY_NAME,
        "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
        "GIT_AUTHOR_DATE": IDENTITY_DATE,
        "GIT_COMMITTER_NAME": IDENTITY_NAME,
        "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
        "GIT_COMMITTER_DATE": IDENTITY_DATE,
        "LC_ALL": "C",
    })
    return env


GIT_ENV = git_env()


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "core.fileMode=true",
         "-c", "commit.gpgsign=false", *args],
        cwd=cwd, env=GIT_ENV, input=input, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return ("tests" in parts[:-1] or "test" in parts[:-1] or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def patch_paths(text: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/\S+$", text, flags=re.M)


class Instance:
    def __init__(self, folder: Path):
        self.folder = folder
        self.id = folder.name
        self.meta = json.loads((folder / "meta.json").read_text())
        self.issue = (folder / "issue.md").read_text()
        self.gold = (folder / "gold.patch").read_text()
        self.test_patch = (folder / "test.patch").read_text()
        self.f2p = list(self.meta.get("FAIL_TO_PASS", []))
        self.p2p = list(self.meta.get("PASS_TO_PASS", []))
        self.split = self.meta.get("split", "?")
        self.base_commit = ""

    def lint(self) -> list[str]:
        errs = []
        if set(self.meta) != META_KEYS:
            errs.append(f"meta.json keys {sorted(self.meta)} != {sorted(META_KEYS)}")
        if self.meta.get("instance_id") != self.id:
            errs.append(f"instance_id {self.meta.get('instance_id')!r} != folder name")
        name = str(self.meta.get("repo", "")).partition("/")[2]
        if not (str(self.meta.get("repo", "")).startswith("openclaw/") and name
                and self.id.startswith(f"openclaw__{name}-")):
            errs.append("repo is not openclaw/<name> for an id openclaw__<name>-<n>")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            value = self.meta.get(key)
            if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
                errs.append(f"{key} is not a list of node ids")
            elif len(set(value)) != len(value):
                errs.append(f"{key} lists a test twice")
        if self.split not in SPLITS:
            errs.append(f"split {self.split!r} not in {SPLITS}")
        if not self.f2p:
            errs.append("FAIL_TO_PASS is empty")
        if len(self.p2p) < 3:
            errs.append("PASS_TO_PASS lists fewer than 3 tests")
        if set(self.f2p) & set(self.p2p):
            errs.append("a test is in both FAIL_TO_PASS and PASS_TO_PASS")
        if not self.issue.strip():
            errs.append("issue.md is empty")
        gold_paths = patch_paths(self.gold)
        test_paths = patch_paths(self.test_patch)
        if not gold_paths:
            errs.append("gold.patch changes no file")
        if not test_paths:
            errs.append("test.patch changes no file")
        errs += [f"gold.patch touches a test file: {p}" for p in gold_paths if is_test_path(p)]
        errs += [f"test.patch touches a non-test file: {p}" for p in test_paths
                 if not is_test_path(p)]
        return errs


def make_base(inst: Instance, work: Path) -> Path:
    base = work / "base"
    shutil.copytree(inst.folder / "repo", base, ignore=COPY_IGNORE)
    for root, dirs, files in os.walk(base):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    git(base, "init", "-q", "--template=", "-b", "main")
    git(base, "add", "-A")
    git(base, "commit", "-q", "--no-verify", "-m", BASE_MESSAGE)
    inst.base_commit = git(base, "rev-parse", "HEAD").strip()
    return base


_counter = iter(range(1_000_000))


def fresh_copy(base: Path, work: Path, label: str) -> Path:
    dst = work / f"{label}-{next(_counter)}"
    git(work, "clone", "-q", "--template=", str(base), str(dst))
    return dst


def apply(repo: Path, patch: str, what: str) -> None:
    if not patch.strip():
        return  # an empty diff changes nothing (git apply refuses empty input)
    try:
        git(repo, "apply", "--whitespace=nowarn", "-", input=patch)
    except CheckError as e:
        raise CheckError(f"{what} does not apply: {e}") from None


class Runner:
    def __init__(self, python: str, timeout: float):
        self.python = python
        self.timeout = timeout

    def env(self, extra: dict | None = None) -> dict:
        env = dict(os.environ)
        env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        env.pop("PYTHONPATH", None)
        if extra:
            env.update(extra)
        return env

    def pytest(self, repo: Path, args: list[str], env: dict | None = None):
        cmd = [self.python, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
        try:
            proc = subprocess.run(cmd, cwd=repo, env=env or self.env(), capture_output=True,
                                  text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {self.timeout:g}s"
        return proc.returncode, proc.stdout + proc.stderr

    def outcomes(self, repo: Path, ids: list[str]) -> tuple[dict, str]:
        """Each node id's outcome: PASSED, FAILED, ERROR, ... or MISSING."""
        rc, out = self.pytest(repo, ["-rA", *ids])
        status: dict[str, str] = {}
        if rc is not None:
            for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", out,
                                 flags=re.M):
                word, node = m.groups()
                if status.get(node, "PASSED") == "PASSED":
                    status[node] = word
        return {i: status.get(i, "MISSING") for i in ids}, out

    def collect(self, repo: Path) -> tuple[list[str], str]:
        rc, out = self.pytest(repo, ["--collect-only"])
        if rc not in (0, 5):
            return [], out
        return [line.strip() for line in out.splitlines() if "::" in line], out

    def trace(self, repo: Path, node: str, work: Path) -> list:
        plugin_dir = work / "trace-plugin"
        plugin_dir.mkdir(exist_ok=True)
        (plugin_dir / "_swe_trace.py").write_text(TRACE_PLUGIN)
        out_file = work / f"trace-{next(_counter)}.json"
        env = self.env({"PYTHONPATH": str(plugin_dir), "SWE_TRACE_ROOT": str(repo),
                        "SWE_TRACE_OUT": str(out_file)})
        rc, out = self.pytest(repo, ["-p", "_swe_trace", node], env=env)
        if rc != 0 or not out_file.exists():
            raise CheckError(f"tracing {node} failed:\n{out}")
        return json.loads(out_file.read_text())


def score(runner: Runner, inst: Instance, base: Path, work: Path, patch: str, label: str):
    """The environment's verdict: (resolved, outcomes, note)."""
    repo = fresh_copy(base, work, label)
    try:
        apply(repo, patch, "candidate")
    except CheckError as e:
        return False, {}, str(e)
    try:
        apply(repo, inst.test_patch, "test.patch")
    except CheckError as e:
        return False, {}, str(e)
    res, out = runner.outcomes(repo, inst.f2p + inst.p2p)
    resolved = bool(res) and all(v == "PASSED" for v in res.values())
    return resolved, res, out


def break_function(path: Path, firstlineno: int, name: str) -> bool:
    """Makes the function defined at firstlineno raise as its first statement."""
    src = path.read_text()
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != name:
            continue
        starts = {node.lineno, *(d.lineno for d in node.decorator_list)}
        if firstlineno not in starts:
            continue
        first = node.body[0]
        if first.lineno == node.lineno:
            return False  # body on the def line
        lines = src.splitlines(keepends=True)
        lines.insert(first.lineno - 1, " " * first.col_offset + BREAK_LINE + "\n")
        new = "".join(lines)
        ast.parse(new)
        path.write_text(new)
        return True
    return False


def breaking_patch(runner: Runner, inst: Instance, base: Path, work: Path):
    """gold.patch plus a change that makes a PASS_TO_PASS test fail, as one diff."""
    repo = fresh_copy(base, work, "gen-broken")
    apply(repo, inst.test_patch, "test.patch")
    git(repo, "add", "-A")  # staged: left out of the diff below
    apply(repo, inst.gold, "gold.patch")
    for node in inst.p2p:
        for rel, lineno, name in runner.trace(repo, node, work):
            if break_function(repo / rel, lineno, name):
                git(repo, "add", "-N", ".")  # files that gold.patch creates, if any
                return git(repo, "diff"), node, f"{rel}:{name}"
    raise CheckError("no PASS_TO_PASS test runs a source function that can be broken")


def check_instance(inst: Instance, runner: Runner, keep: bool, skip: bool) -> dict:
    row = {"id": inst.id, "split": inst.split, "base": "", "before": "-", "gold": "-",
           "empty": "-", "broken": "-", "problems": []}
    work = Path(tempfile.mkdtemp(prefix=f"swe-{inst.id}-"))
    try:
        row["problems"] += [f"lint: {e}" for e in inst.lint()]
        base = make_base(inst, work)
        row["base"] = inst.base_commit
        if skip:
            return row

        # (1) test.patch alone
        repo = fresh_copy(base, work, "before")
        apply(repo, inst.test_patch, "test.patch")
        res, out = runner.outcomes(repo, inst.f2p + inst.p2p)
        bad = [f"{i} {res[i]} (should fail)" for i in inst.f2p if res[i] == "PASSED"]
        bad += [f"{i} {res[i]} (should pass)" for i in inst.p2p if res[i] != "PASSED"]
        collected, cout = runner.collect(repo)
        listed = set(inst.f2p) | set(inst.p2p)
        if not collected:
            bad.append(f"collection failed:\n{cout}")
        bad += [f"{i} collected but not listed" for i in collected if i not in listed]
        bad += [f"{i} listed but not collected" for i in sorted(listed - set(collected))]
        row["before"] = "ok" if not bad else "MISMATCH"
        if bad:
            row["problems"] += ["before: " + b for b in bad] + [out]

        # (2) gold + test.patch
        resolved, res, out = score(runner, inst, base, work, inst.gold, "gold")
        row["gold"] = "resolved" if resolved else "UNRESOLVED"
        if not resolved:
            row["problems"] += [f"gold: {i} {v}" for i, v in res.items() if v != "PASSED"]
            row["problems"].append(out)

        # (3) empty diff + test.patch
        resolved, res, out = score(runner, inst, base, work, "", "empty")
        row["empty"] = "RESOLVED" if resolved else "unresolved"
        if resolved:
            row["problems"].append("empty: resolved with no change")

        # (4) gold + a break of one PASS_TO_PASS test + test.patch
        patch, node, target = breaking_patch(runner, inst, base, work)
        resolved, res, out = score(runner, inst, base, work, patch, "broken")
        row["broken"] = "RESOLVED" if resolved else "unresolved"
        row["broke"] = f"{target} -> {node}"
        if WRITE_BROKEN:
            (inst.folder / "broken.patch").write_text(patch)
            (inst.folder / "broken.json").write_text(
                json.dumps({"test": node, "function": target}, indent=2) + "\n")
        if resolved:
            row["problems"].append(f"broken: resolved although {target} raises")
        elif res.get(node) == "PASSED":
            row["broken"] = "MISMATCH"
            row["problems"].append(f"broken: {node} passed although {target} raises")
    except CheckError as e:
        row["problems"].append(f"error: {e}")
    except Exception as e:  # noqa: BLE001 - one instance's failure must not stop the rest
        row["problems"].append(f"error: {type(e).__name__}: {e}")
    finally:
        if keep:
            row["kept"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return row


def jsonl_row(inst: Instance) -> dict:
    return {
        "instance_id": inst.id,
        "repo": inst.meta["repo"],
        "base_commit": inst.base_commit,
        "problem_statement": inst.issue,
        "patch": inst.gold,
        "test_patch": inst.test_patch,
        "FAIL_TO_PASS": inst.f2p,
        "PASS_TO_PASS": inst.p2p,
        "split": inst.split,
        "repo_dir": f"{inst.id}/repo",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids", nargs="*", help="instance ids (default: every folder with meta.json)")
    ap.add_argument("--write-jsonl", metavar="FILE", help="write the set as SWE-bench JSONL")
    ap.add_argument("--skip-checks", action="store_true",
                    help="only compute base commits (and write the JSONL)")
    ap.add_argument("--python", default=sys.executable, help="python that runs pytest")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per pytest run")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="instances checked at once")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    ap.add_argument("--write-broken", action="store_true",
                    help="write each instance's broken.patch and broken.json")
    ap.add_argument("--verbose", "-v", action="store_true", help="say which function broke")
    args = ap.parse_args()
    global WRITE_BROKEN
    WRITE_BROKEN = args.write_broken

    folders = sorted(p.parent for p in HERE.glob("*/meta.json"))
    if args.ids:
        by_id = {f.name: f for f in folders}
        unknown = [i for i in args.ids if i not in by_id]
        if unknown:
            print(f"unknown instance(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        folders = [by_id[i] for i in args.ids]
    if not folders:
        print("no instances found", file=sys.stderr)
        return 2
    if not args.skip_checks:
        probe = subprocess.run([args.python, "-c", "import pytest"], capture_output=True)
        if probe.returncode != 0:
            print(f"{args.python} cannot import pytest; pass --python (e.g. /usr/bin/python3)",
                  file=sys.stderr)
            return 2

    start = time.monotonic()
    instances = [Instance(f) for f in folders]
    runner = Runner(args.python, args.timeout)
    header = f"{'instance':<28} {'split':<5} {'base commit':<40} {'before':<8} " \
             f"{'gold':<10} {'empty':<10} {'broken':<10}"
    print(header)
    print("-" * len(header), flush=True)
    rows = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(check_instance, inst, runner, args.keep, args.skip_checks)
                   for inst in instances]
        for fut in futures:
            r = fut.result()
            rows.append(r)
            mark = "  !" if r["problems"] else ""
            print(f"{r['id']:<28} {r['split']:<5} {r['base'] or '?':<40} {r['before']:<8} "
                  f"{r['gold']:<10} {r['empty']:<10} {r['broken']:<10}{mark}", flush=True)
            if args.verbose and r.get("broke"):
                print(f"    broken: {r['broke']}")
            if r.get("kept"):
                print(f"    kept: {r['kept']}")

    bad = [r for r in rows if r["problems"]]
    for r in bad:
        print(f"\n== {r['id']}")
        for p in r["problems"]:
            print(p.rstrip())
    splits = {s: sum(1 for i in instances if i.split == s) for s in SPLITS}
    repos: dict[str, set] = {}
    for i in instances:
        repos.setdefault(i.meta.get("repo"), set()).add(i.split)
    shared = sorted(r for r, s in repos.items() if len(s) > 1)
    if shared:
        print(f"\nrepositories in both splits: {', '.join(map(str, shared))}")
    elapsed = time.monotonic() - start
    print(f"\n{len(rows)} instances ({splits['train']} train, {splits['test']} test), "
          f"{len(bad)} with problems, {elapsed:.1f}s")

    if args.write_jsonl:
        with open(args.write_jsonl, "w") as f:
            for inst in instances:
                f.write(json.dumps(jsonl_row(inst)) + "\n")
        print(f"wrote {len(instances)} rows to {args.write_jsonl}")
    return 1 if bad or shared else 0


if __name__ == "__main__":
    sys.exit(main())
