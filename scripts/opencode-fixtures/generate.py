#!/usr/bin/env python3
"""Make small databases with real OpenCode releases, for the version-matrix fixtures.

Commands (stdlib Python 3.11, no third-party module):

  generate.py make VERSION OUTDIR [--bin BIN]
      Runs OpenCode VERSION isolated against a scripted local model and writes OUTDIR/opencode.db
      (checkpointed, no -wal/-shm), OUTDIR/tool-output/ (if OpenCode spilled any output),
      OUTDIR/manifest.json and OUTDIR/README.md.
  generate.py upgrade SRCDIR OUTDIR [--bin BIN]
      Copies SRCDIR/opencode.db (a fixture made by `make`), opens it with OpenCode 1.18.34
      (serve, GET /session, read each session's messages, SIGTERM), checkpoints it and writes the
      same four entries into OUTDIR, plus what the upgrade changed in the manifest.
  generate.py all [--only VERSION ...]
      Installs every release of the matrix with scripts/install-opencode.sh, then runs `make` for
      each into tests/fixtures/opencode-VERSION/ (1.18.34 into opencode-1.18.34-matrix/, so that the
      older tests/fixtures/opencode-1.18.34/ stays as it is) and `upgrade` for 1.2.27 and 1.14.48.

Scenarios of `make` (each one as far as the release supports it; the manifest says what was skipped):
  a  one turn: reasoning + a completed bash call whose output holds TOOL_CANARY_<version>_01
  b  three more turns in one session (each reasoning + bash + text); the third one prints more
     than 2000 lines, so OpenCode truncates it and spills the full text into tool-output/
  c  POST /session/{a}/fork, then one turn in the fork only
  d  two turns, POST /session/{id}/summarize, then one more turn
  e  a second server: prompt_async whose bash call runs `sleep 300`, then SIGKILL of the server
     (and of the processes it started) while the tool runs
The first server (a-d) is stopped with SIGTERM; the second one (e) with SIGKILL.

Isolation: every OpenCode process gets its own HOME and XDG_* dirs under the scratch directory
($OPENCODE_FIXTURES_SCRATCH, default /tmp/session-pruning-opencode-fixtures/<label>, wiped at the
start of each run; its path is fixed so the paths stored in the databases do not change between
runs), a git work tree as its project directory, OPENCODE_DISABLE_AUTOUPDATE/MODELS_FETCH/
DEFAULT_PLUGINS, and a config whose only provider is the mock model on 127.0.0.1. Once the binaries
are installed (npm, outside), each `make`/`upgrade` runs in its own network namespace that holds only
loopback (`unshare --net`, as root); where that is not possible (or OPENCODE_FIXTURES_NO_NETNS=1),
the npm/bun registry and HTTP(S) proxy variables point at the closed port 127.0.0.1:9 instead:
releases up to 1.15 try to install @opencode-ai/plugin into their config dir at start-up. Every wait
has a deadline; processes are stopped by PID only (the server and the descendants it started).
The upgrade runs in the scratch tree of its source release, so that the directory its sessions name
is the server's project directory and GET /session lists them.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE.parent.parent
INSTALLER = WORKSPACE / "scripts" / "install-opencode.sh"
FIXTURES = WORKSPACE / "tests" / "fixtures"
MATRIX = ["1.2.27", "1.3.2", "1.14.48", "1.15.13", "1.17.19", "1.18.34", "1.19.5"]
UPGRADE_TO = "1.18.34"
UPGRADE_FROM = ["1.2.27", "1.14.48"]
PROVIDER = "fixturemock"
MODEL_ID = "fixture-model"
MODEL = {"providerID": PROVIDER, "modelID": MODEL_ID}
TAG = re.compile(r"\[\[mock:(bash|spill|hang):(\d+)\]\]")
CANARY = re.compile(r"\b(?:TOOL|REASONING|TEXT|SUMMARY)_CANARY_\d+\.\d+\.\d+_[0-9A-Za-z]+")

DEAD_END = "http://127.0.0.1:9/"  # the discard port: nothing listens there
NETNS_ENV = "OPENCODE_FIXTURES_NETNS"
RUN_TIMEOUT = 900  # one `make` or `upgrade`, all waits included
STARTUP_TIMEOUT = 120.0
PROMPT_TIMEOUT = 180.0
STOP_TIMEOUT = 20.0


def say(*words: object) -> None:
    print("[opencode-fixtures]", *words, file=sys.stderr, flush=True)


def fixture_dir_for(version: str) -> Path:
    name = "opencode-%s-matrix" % version if version == "1.18.34" else "opencode-%s" % version
    return FIXTURES / name


# --------------------------------------------------------------------------------------------
# The scripted model: an OpenAI-compatible /v1/chat/completions endpoint that streams SSE chunks.


class ScriptedModel:
    """Chooses each answer from the request alone.

    * no tools offered: a title request ("title" in the system text) gets a short title, any other
      request (a compaction summary) gets the summary text with SUMMARY_CANARY_<label>_S;
    * tools offered and the conversation ends with a tool result: the closing text of the turn,
      TEXT_CANARY_<label>_NN, NN taken from the tag of the newest user message;
    * tools offered and the newest user message carries [[mock:KIND:NN]]: reasoning with
      REASONING_CANARY_<label>_NN and one bash call: `bash` prints a few KB starting with
      TOOL_CANARY_<label>_NN, `spill` prints over 2000 lines (the canary first and last), `hang`
      runs `sleep 300`;
    * tools offered, no tag (a summary asked for with tools): the summary text.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.calls = 0
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    def canary(self, kind: str, n: str) -> str:
        return "%s_CANARY_%s_%s" % (kind, self.label, n)

    # -- answers -----------------------------------------------------------------------------

    @staticmethod
    def _text(message: dict) -> str:
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
        return ""

    def plan(self, body: dict) -> dict:
        messages = body.get("messages") or []
        system = " ".join(self._text(m) for m in messages if m.get("role") == "system").lower()
        newest_user = next((self._text(m) for m in reversed(messages) if m.get("role") == "user"), "")
        tag = TAG.search(newest_user)
        kind, n = (tag.group(1), "%02d" % int(tag.group(2))) if tag else (None, None)
        if not body.get("tools"):
            if "title" in system:
                return {"answer": "title", "text": "Fixture %s" % (n or "session")}
            return {"answer": "summary", "text": self.summary_text()}
        if messages and messages[-1].get("role") == "tool":
            return {"answer": "final", "n": n,
                    "text": "Turn %s is done: %s. Keep this line." % (n or "?", self.canary("TEXT", n or "X"))}
        if kind is None:
            return {"answer": "summary", "text": self.summary_text()}
        return {"answer": "tool", "kind": kind, "n": n}

    def summary_text(self) -> str:
        return ("%s: earlier turns ran bash and printed numbered lines; every result was "
                "acknowledged." % self.canary("SUMMARY", "S"))

    def bash_call(self, kind: str, n: str) -> tuple[dict, str]:
        tool_canary = self.canary("TOOL", n)
        reasoning = "Turn %s needs the shell. %s" % (n, self.canary("REASONING", n))
        if kind == "hang":
            return {"command": "sleep 300", "description": "Wait a long time (turn %s)" % n}, reasoning
        if kind == "spill":
            command = "echo %s; seq 1 2100; echo %s" % (tool_canary, tool_canary)
            return {"command": command, "description": "Print 2100 numbers (turn %s)" % n}, reasoning
        start = 1000 * int(n)
        command = "echo %s; seq %d %d" % (tool_canary, start, start + 599)
        return {"command": command, "description": "Print 600 numbers (turn %s)" % n}, reasoning

    # -- HTTP --------------------------------------------------------------------------------

    def start(self) -> int:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep stderr quiet
                pass

            def send_json(self, obj: object) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self.send_json({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                model.answer(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="scripted-model", daemon=True)
        self.thread.start()
        return self.server.server_address[1]

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        plan = self.plan(body)
        with self.lock:
            self.calls += 1
            call_no = self.calls
            self.requests.append({"answer": plan["answer"], "kind": plan.get("kind"), "n": plan.get("n"),
                                  "stream": bool(body.get("stream")), "messages": len(body.get("messages") or []),
                                  "tools": len(body.get("tools") or [])})
        usage = {"prompt_tokens": 900 + 7 * len(body.get("messages") or []), "completion_tokens": 30}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            text = plan.get("text", "")
            handler.send_json({"id": "cmpl-%d" % call_no, "object": "chat.completion", "created": 0,
                               "model": MODEL_ID, "usage": usage,
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}]})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

        def emit(delta: dict, finish: str | None = None, with_usage: bool = False) -> None:
            chunk = {"id": "cmpl-%d" % call_no, "object": "chat.completion.chunk", "created": 0,
                     "model": MODEL_ID, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if with_usage:
                chunk["usage"] = usage
            handler.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
            handler.wfile.flush()

        try:
            emit({"role": "assistant", "content": ""})
            if plan["answer"] == "tool":
                args, reasoning = self.bash_call(plan["kind"], plan["n"])
                for piece in re.findall(r"\S+\s*", reasoning):
                    emit({"reasoning_content": piece})
                call_id = "call_%s_%03d" % (self.label.replace(".", "_"), call_no)
                emit({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                      "function": {"name": "bash", "arguments": ""}}]})
                encoded = json.dumps(args)
                cut = len(encoded) // 2
                for piece in (encoded[:cut], encoded[cut:]):
                    emit({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                emit({}, "tool_calls", True)
            else:
                for piece in re.findall(r"\S+\s*", plan["text"]):
                    emit({"content": piece})
                emit({}, "stop", True)
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


# --------------------------------------------------------------------------------------------
# Processes: started here, stopped by PID (the server and whatever it spawned).


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields after its last ')' are fixed
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    kids = children_map()
    found: list[int] = []
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(kids.get(p, []))
    return found


def signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def stop_process(proc: subprocess.Popen, sig: int, grace: float = STOP_TIMEOUT) -> str:
    """Sends `sig` to the process and to every descendant it has now; SIGKILL after `grace`."""
    if proc.poll() is not None:
        return "already exited (%s)" % proc.returncode
    family = descendants(proc.pid)
    signal_pid(proc.pid, sig)
    if sig == signal.SIGKILL:
        for p in family:
            signal_pid(p, signal.SIGKILL)
    try:
        proc.wait(timeout=grace)
        how = "exited after %s (%s)" % (signal.Signals(sig).name, proc.returncode)
    except subprocess.TimeoutExpired:
        signal_pid(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)
        how = "did not exit after %s in %.0f s: SIGKILL" % (signal.Signals(sig).name, grace)
    for p in family:  # tool processes run in their own sessions and outlive the server
        signal_pid(p, signal.SIGKILL)
    return how


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpError(RuntimeError):
    def __init__(self, status: int, text: str) -> None:
        super().__init__("HTTP %d: %s" % (status, text[:300]))
        self.status = status


class Api:
    def __init__(self, base: str, directory: str) -> None:
        self.base = base
        self.directory = directory

    def call(self, method: str, path: str, body: object = None, timeout: float = 30.0) -> object:
        url = "%s%s?%s" % (self.base, path, urllib.parse.urlencode({"directory": self.directory}))
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as e:
            raise HttpError(e.code, e.read().decode("utf-8", "replace")) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")


def wait_for(what: str, check, timeout: float, step: float = 0.25):
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline, then reported
            last_error = e
        time.sleep(step)
    raise TimeoutError("timed out after %.0f s waiting for %s%s"
                       % (timeout, what, " (last error: %s)" % last_error if last_error else ""))


# --------------------------------------------------------------------------------------------
# One isolated OpenCode home.


class Sandbox:
    def __init__(self, label: str, binary: Path, model_port: int) -> None:
        base = Path(os.environ.get("OPENCODE_FIXTURES_SCRATCH", "/tmp/session-pruning-opencode-fixtures"))
        self.root = base / label
        self.binary = binary
        self.model_port = model_port
        self.lock_file = None
        self.servers: list[subprocess.Popen] = []
        base.mkdir(parents=True, exist_ok=True)
        self.lock_file = open(base / (".%s.lock" % label), "w")
        try:
            fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit("another generator run is using %s" % self.root) from None
        shutil.rmtree(self.root, ignore_errors=True)
        for d in ("home", "data", "config/opencode", "state", "cache", "tmp", "work"):
            (self.root / d).mkdir(parents=True)
        self.work = self.root / "work"
        self.data = self.root / "data" / "opencode"
        (self.root / "home" / ".npmrc").write_text("registry=%s\noffline=true\n" % DEAD_END)
        (self.root / "home" / ".bunfig.toml").write_text('[install]\nregistry = "%s"\n' % DEAD_END)
        self._git_work_tree()
        self._config()

    def _git_work_tree(self) -> None:
        (self.work / "README.txt").write_text("fixture work tree\n")
        env = dict(self.env(), GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
                   GIT_AUTHOR_NAME="fixture", GIT_AUTHOR_EMAIL="fixture@example.invalid",
                   GIT_COMMITTER_NAME="fixture", GIT_COMMITTER_EMAIL="fixture@example.invalid")
        for args in (["init", "-q", "-b", "main"], ["add", "README.txt"], ["commit", "-q", "-m", "fixture"]):
            subprocess.run(["git", *args], cwd=self.work, env=env, check=True, timeout=60,
                           stdout=subprocess.DEVNULL)

    def _config(self) -> None:
        config = {
            "model": "%s/%s" % (PROVIDER, MODEL_ID),
            "small_model": "%s/%s" % (PROVIDER, MODEL_ID),
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow"},
            "provider": {PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fixture mock",
                "options": {"baseURL": "http://127.0.0.1:%d/v1" % self.model_port, "apiKey": "unused"},
                "models": {MODEL_ID: {"name": "Fixture model", "tool_call": True, "reasoning": True,
                                      "limit": {"context": 128000, "output": 4096}}},
            }},
        }
        (self.root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")

    def env(self) -> dict[str, str]:
        r = self.root
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TMPDIR": str(r / "tmp"),
            "HOME": str(r / "home"),
            "XDG_DATA_HOME": str(r / "data"),
            "XDG_CONFIG_HOME": str(r / "config"),
            "XDG_STATE_HOME": str(r / "state"),
            "XDG_CACHE_HOME": str(r / "cache"),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            # Releases up to 1.15 install @opencode-ai/plugin into the config dir at start-up; these
            # send that install (and any other HTTP client honouring them) to a closed loopback port.
            "NPM_CONFIG_REGISTRY": DEAD_END,
            "npm_config_registry": DEAD_END,
            "BUN_CONFIG_REGISTRY": DEAD_END,
            "HTTP_PROXY": DEAD_END,
            "HTTPS_PROXY": DEAD_END,
            "http_proxy": DEAD_END,
            "https_proxy": DEAD_END,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        return env

    def start_server(self, name: str) -> tuple[subprocess.Popen, Api]:
        port = free_port()
        log = open(self.root / ("%s.log" % name), "wb")
        proc = subprocess.Popen([str(self.binary), "serve", "--hostname", "127.0.0.1", "--port", str(port)],
                                cwd=self.work, env=self.env(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)
        log.close()
        self.servers.append(proc)
        api = Api("http://127.0.0.1:%d" % port, str(self.work))

        def up():
            if proc.poll() is not None:
                raise SystemExit("opencode serve exited (%s); see %s" % (proc.returncode, self.root / (name + ".log")))
            return isinstance(api.call("GET", "/session", timeout=5), list)

        wait_for("opencode serve on port %d" % port, up, STARTUP_TIMEOUT, 0.5)
        say("%s: opencode serve pid %d on port %d" % (name, proc.pid, port))
        return proc, api

    def database(self) -> Path:
        found = sorted(self.data.glob("opencode*.db"))
        if len(found) != 1:
            raise SystemExit("expected one database in %s, found %s" % (self.data, [p.name for p in found]))
        return found[0]

    def close(self) -> None:
        for proc in self.servers:
            stop_process(proc, signal.SIGKILL, 5)
        if self.lock_file is not None:
            self.lock_file.close()
            self.lock_file = None


# --------------------------------------------------------------------------------------------
# Scenarios through OpenCode's HTTP API.


def new_session(api: Api, title: str) -> str:
    return api.call("POST", "/session", {"title": title})["id"]


def prompt(api: Api, sid: str, text: str) -> dict:
    return api.call("POST", "/session/%s/message" % sid,
                    {"parts": [{"type": "text", "text": text}], "model": MODEL}, timeout=PROMPT_TIMEOUT)


def messages(api: Api, sid: str) -> list:
    return api.call("GET", "/session/%s/message" % sid, timeout=30)


def turn_finished(api: Api, sid: str, users: int) -> bool:
    ms = messages(api, sid)
    if sum(1 for m in ms if m["info"]["role"] == "user") < users:
        return False
    last = ms[-1]["info"]
    return last["role"] == "assistant" and bool(last.get("time", {}).get("completed"))


def tool_turn(api: Api, sid: str, n: int, kind: str = "bash", words: str = "Run the shell for me.") -> None:
    users = sum(1 for m in messages(api, sid) if m["info"]["role"] == "user") + 1
    prompt(api, sid, "Turn %02d: %s [[mock:%s:%d]]" % (n, words, kind, n))
    wait_for("turn %d to finish" % n, lambda: turn_finished(api, sid, users), PROMPT_TIMEOUT)


def last_bash_status(api: Api, sid: str) -> str | None:
    status = None
    for m in messages(api, sid):
        for p in m["parts"]:
            if p.get("type") == "tool" and p.get("tool") == "bash":
                status = p["state"]["status"]
    return status


def run_scenarios(sandbox: Sandbox) -> dict:
    done: dict[str, dict] = {}

    def attempt(key: str, what: str, fn) -> None:
        started = time.monotonic()
        try:
            info = fn() or {}
            done[key] = {"status": "done", "what": what, **info}
            say("scenario %s done in %.1f s" % (key, time.monotonic() - started))
        except HttpError as e:
            reason = ("route not served by this release (HTTP %d)" % e.status) if e.status in (404, 405) else str(e)
            done[key] = {"status": "skipped", "what": what, "reason": reason}
            say("scenario %s skipped: %s" % (key, reason))
        except (TimeoutError, KeyError, TypeError, urllib.error.URLError, OSError) as e:
            done[key] = {"status": "failed", "what": what, "reason": "%s: %s" % (type(e).__name__, e)}
            say("scenario %s failed: %s" % (key, e))

    proc, api = sandbox.start_server("serve-1")
    sessions: dict[str, str] = {}

    def a():
        sid = sessions["a"] = new_session(api, "fixture a: one tool call")
        tool_turn(api, sid, 1)
        return {"session": sid, "turns": [1]}

    def b():
        sid = sessions["b"] = new_session(api, "fixture b: three turns")
        tool_turn(api, sid, 2)
        tool_turn(api, sid, 3, words="Once more, please.")
        tool_turn(api, sid, 4, kind="spill", words="Print over two thousand lines so the output is cut.")
        return {"session": sid, "turns": [2, 3, 4], "spilled_turn": 4}

    def c():
        src = sessions.get("a")
        if not src:
            raise KeyError("scenario a made no session to fork")
        fork = api.call("POST", "/session/%s/fork" % src, {}, timeout=60)
        sid = sessions["c"] = fork["id"]
        tool_turn(api, sid, 5, words="Continue in the fork only.")
        return {"session": sid, "forked_from": src, "turns": [5]}

    def d():
        sid = sessions["d"] = new_session(api, "fixture d: compacted")
        tool_turn(api, sid, 6)
        tool_turn(api, sid, 7, words="And again.")
        answer = api.call("POST", "/session/%s/summarize" % sid, dict(MODEL), timeout=PROMPT_TIMEOUT)

        def summarised():
            ms = messages(api, sid)
            return any(m["info"]["role"] == "assistant" and m["info"].get("summary") is True
                       and m["info"].get("time", {}).get("completed") for m in ms)

        wait_for("the compaction summary", summarised, PROMPT_TIMEOUT)
        wait_for("the session to be idle", lambda: session_idle(api, sid), 60)
        tool_turn(api, sid, 8, words="One more after the summary.")
        return {"session": sid, "turns": [6, 7, 8], "summarize_answer": answer}

    attempt("a_tool_call", "one turn with reasoning and a completed bash call", a)
    attempt("b_multi_turn", "three turns with reasoning, bash and text; turn 4 spills to tool-output/", b)
    attempt("c_fork", "POST /session/{a}/fork, then one turn in the fork", c)
    attempt("d_compaction", "two turns, POST /session/{id}/summarize, one more turn", d)
    done["_serve-1_stop"] = {"how": stop_process(proc, signal.SIGTERM)}

    # (e) a second server, killed while the bash tool of a turn runs `sleep 300`
    proc, api = sandbox.start_server("serve-2")

    def e():
        sid = sessions["e"] = new_session(api, "fixture e: killed run")
        body = {"parts": [{"type": "text", "text": "Turn 09: wait for a long time. [[mock:hang:9]]"}], "model": MODEL}
        how = "prompt_async"
        try:
            api.call("POST", "/session/%s/prompt_async" % sid, body, timeout=30)
        except HttpError as err:
            if err.status not in (404, 405):
                raise
            how = "message (prompt_async not served; the request was left waiting)"

            def fire():
                try:
                    api.call("POST", "/session/%s/message" % sid, body, timeout=330)
                except Exception:  # noqa: BLE001 - the server is killed under it
                    pass

            threading.Thread(target=fire, daemon=True).start()
        wait_for("the bash tool to run `sleep 300`", lambda: last_bash_status(api, sid) == "running", PROMPT_TIMEOUT)
        sleeper = [p for p in descendants(proc.pid) if cmdline(p).startswith("sleep")]
        time.sleep(1.0)  # let the running state reach the database
        return {"session": sid, "started_with": how, "sleep_pids_seen": len(sleeper)}

    attempt("e_killed_run", "prompt_async running `sleep 300`, then SIGKILL of the server", e)
    done["_serve-2_stop"] = {"how": stop_process(proc, signal.SIGKILL)}
    return {"scenarios": done, "sessions": sessions}


def session_idle(api: Api, sid: str) -> bool:
    try:
        status = api.call("GET", "/session/status", timeout=10)
    except HttpError as e:
        if e.status in (404, 405):
            return True
        raise
    return not isinstance(status, dict) or sid not in status or status[sid].get("type") == "idle"


def cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------
# Database facts and the manifest.


def checkpoint(db: Path) -> dict:
    con = sqlite3.connect(str(db))
    try:
        busy, log_frames, moved = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        con.close()
    leftovers = [p.name for p in (Path(str(db) + "-wal"), Path(str(db) + "-shm")) if p.exists()]
    if busy or integrity != "ok":
        raise SystemExit("checkpoint of %s: busy=%s integrity=%s" % (db, busy, integrity))
    for name in leftovers:  # after the last connection closes, a truncated WAL holds nothing
        extra = db.parent / name
        if name.endswith("-wal") and extra.stat().st_size:
            raise SystemExit("WAL of %s still holds %d bytes" % (db, extra.stat().st_size))
        extra.unlink()
    return {"wal_frames_checkpointed": moved, "integrity_check": integrity, "journal_mode": mode}


def open_ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect("file:%s?immutable=1" % urllib.parse.quote(str(db)), uri=True)


def header_journal_mode(con: sqlite3.Connection) -> str:
    """The journal mode a normal open gets: bytes 18/19 of the file header are 2 in WAL mode."""
    path = con.execute("pragma database_list").fetchone()[2]
    with open(path, "rb") as f:
        header = f.read(20)
    return "wal" if header[18:20] == b"\x02\x02" else "delete (rollback journal)"


def schema_facts(con: sqlite3.Connection) -> dict:
    q = lambda sql, *a: con.execute(sql, a).fetchall()  # noqa: E731
    tables = [r[0] for r in q("select name from sqlite_master where type='table' and name not like 'sqlite_%' order by name")]
    facts: dict = {"tables": tables}
    facts["journal_mode"] = header_journal_mode(con)
    facts["page_size"] = q("pragma page_size")[0][0]
    facts["user_version"] = q("pragma user_version")[0][0]
    facts["session_columns"] = [r[1] for r in q("pragma table_info(session)")]
    facts["indexes"] = {t: sorted(r[1] for r in q("pragma index_list('%s')" % t) if not r[1].startswith("sqlite_autoindex"))
                        for t in ("session", "message", "part", "event", "session_message") if t in tables}
    facts["index_columns"] = {r[0]: [c[2] for c in q("pragma index_info('%s')" % r[0])]
                              for r in q("select name from sqlite_master where type='index' and name not like 'sqlite_%' "
                                         "and tbl_name in ('message','part','event','session_message') order by name")}
    facts["event_tables"] = "event" in tables and "event_sequence" in tables
    facts["event_sequence_columns"] = [r[1] for r in q("pragma table_info(event_sequence)")] if "event_sequence" in tables else []
    facts["event_columns"] = [r[1] for r in q("pragma table_info(event)")] if "event" in tables else []
    facts["session_message_columns"] = ([r[1] for r in q("pragma table_info(session_message)")]
                                        if "session_message" in tables else [])
    migrations: dict = {}
    if "__drizzle_migrations" in tables:
        cols = [r[1] for r in q("pragma table_info(__drizzle_migrations)")]
        order = "created_at, id" if "created_at" in cols else "rowid"
        rows = q("select * from __drizzle_migrations order by %s" % order)
        named = [dict(zip(cols, r)) for r in rows]
        migrations["__drizzle_migrations"] = {"columns": cols, "rows": len(rows),
                                              "last": (named[-1].get("name") or named[-1].get("hash")) if named else None,
                                              "names": [n.get("name") for n in named]}
    if "migration" in tables:
        cols = [r[1] for r in q("pragma table_info(migration)")]
        rows = q("select id from migration order by id")
        migrations["migration"] = {"columns": cols, "rows": len(rows), "last": rows[-1][0] if rows else None,
                                   "ids": [r[0] for r in rows]}
    facts["migrations"] = migrations
    facts["row_counts"] = {t: q('select count(*) from "%s"' % t)[0][0] for t in tables}
    return facts


def canaries_in(text: str) -> list[str]:
    return sorted(set(CANARY.findall(text)))


def message_state(info: dict) -> str:
    if info.get("role") != "assistant":
        return "n/a"
    if info.get("error"):
        return "error"
    if info.get("time", {}).get("completed"):
        return "complete"
    return "incomplete"


def describe_part(pid: str, data: str) -> dict:
    d = json.loads(data)
    out: dict = {"id": pid, "type": d.get("type")}
    if d.get("type") == "tool":
        st = d.get("state") or {}
        md = st.get("metadata") or {}
        out.update(tool=d.get("tool"), status=st.get("status"))
        if "output" in st:
            out["output_chars"] = len(st["output"])
        if isinstance(md.get("output"), str):
            out["metadata_output_chars"] = len(md["output"])
        if md.get("truncated"):
            out["truncated"] = True
        if md.get("outputPath"):
            out["tool_output_file"] = os.path.basename(md["outputPath"])
        if st.get("time", {}).get("compacted"):
            out["compacted"] = True
    elif d.get("type") in ("text", "reasoning"):
        out["chars"] = len(d.get("text", ""))
        out["ended"] = bool((d.get("time") or {}).get("end"))
    elif d.get("type") == "step-finish":
        out["reason"] = d.get("reason")
    elif d.get("type") == "compaction":
        out["auto"] = d.get("auto")
    out["canaries"] = canaries_in(data)
    out["bytes"] = len(data.encode())
    return out


def sessions_facts(con: sqlite3.Connection, by_id: dict[str, str]) -> list[dict]:
    q = lambda sql, *a: con.execute(sql, a).fetchall()  # noqa: E731
    tables = {r[0] for r in q("select name from sqlite_master where type='table'")}
    out = []
    for sid, title, directory, parent in q("select id, title, directory, parent_id from session order by time_created, id"):
        s: dict = {"id": sid, "scenario": by_id.get(sid), "title": title, "directory": directory, "parent_id": parent}
        if "event" in tables:
            s["events"] = q("select count(*) from event where aggregate_id=?", sid)[0][0]
        s["messages"] = []
        for mid, data in q("select id, data from message where session_id=? order by time_created, id", sid):
            info = json.loads(data)
            m = {"id": mid, "role": info.get("role"), "state": message_state(info)}
            for key in ("finish", "summary", "mode", "agent"):
                if key in info and not (key == "summary" and info.get("role") == "user"):
                    m[key] = info[key]
            if info.get("error"):
                m["error"] = (info["error"] or {}).get("name")
            m["canaries"] = canaries_in(data)
            m["parts"] = [describe_part(pid, pdata) for pid, pdata in
                          q("select id, data from part where message_id=? order by id", mid)]
            s["messages"].append(m)
        out.append(s)
    return out


def canary_counts(con: sqlite3.Connection, outdir: Path) -> dict:
    tables = [t for t in ("part", "message", "event", "session_message")
              if con.execute("select 1 from sqlite_master where type='table' and name=?", (t,)).fetchone()]
    found: dict[str, dict] = {}
    for t in tables:
        for (data,) in con.execute('select data from "%s"' % t):
            for c in canaries_in(data):
                found.setdefault(c, {}).setdefault(t, 0)
                found[c][t] += 1
    spill = outdir / "tool-output"
    if spill.is_dir():
        for f in sorted(spill.iterdir()):
            for c in canaries_in(f.read_text("utf-8", "replace")):
                found.setdefault(c, {}).setdefault("tool_output_files", 0)
                found[c]["tool_output_files"] += 1
    return dict(sorted(found.items()))


def row_shapes(con: sqlite3.Connection) -> dict:
    """Key sets of the JSON rows, by kind: what the code has to read in this release."""
    shapes: dict[str, set] = {}

    def add(kind: str, keys) -> None:
        shapes.setdefault(kind, set()).add(",".join(keys))

    for (data,) in con.execute("select data from message"):
        d = json.loads(data)
        kind = "message/%s%s" % (d.get("role"), "/summary" if d.get("summary") is True else "")
        add(kind, sorted(d))
        add(kind + ".time", sorted(d.get("time") or {}))
    for (data,) in con.execute("select data from part"):
        d = json.loads(data)
        kind = "part/%s" % d.get("type")
        if d.get("type") == "tool":
            st = d.get("state") or {}
            kind += "/%s/%s" % (d.get("tool"), st.get("status"))
            add(kind + ".state", sorted(st))
            add(kind + ".state.metadata", sorted(st.get("metadata") or {}))
            add(kind + ".state.time", sorted(st.get("time") or {}))
        add(kind, sorted(d))
    return {k: sorted(v) for k, v in sorted(shapes.items())}


def event_facts(con: sqlite3.Connection) -> dict:
    if not con.execute("select 1 from sqlite_master where name='event'").fetchone():
        return {"present": False}
    types = dict(con.execute("select type, count(*) from event group by type order by type").fetchall())
    owners = [r[0] for r in con.execute("select distinct owner_id from event_sequence")] \
        if "owner_id" in [r[1] for r in con.execute("pragma table_info(event_sequence)")] else None
    seq = con.execute("select min(seq), max(seq) from event").fetchone()
    return {"present": True, "rows": sum(types.values()), "types": types, "sequences":
            con.execute("select count(*) from event_sequence").fetchone()[0], "owner_ids": owners,
            "seq_min": seq[0], "seq_max": seq[1]}


def output_shapes(con: sqlite3.Connection) -> dict:
    """How a truncated bash output looks: its first characters and whether it keeps head or tail."""
    out = {}
    for (data,) in con.execute("select data from part where data like '%\"truncated\":true%'"):
        d = json.loads(data)
        st = d.get("state") or {}
        text = st.get("output") or ""
        md = st.get("metadata") or {}
        out = {"state_output_starts": text[:60], "state_output_ends": text[-120:],
               "state_output_has_first_line": "\n1\n" in text[:80] or text.startswith("TOOL_CANARY"),
               "state_output_has_last_line": "\n2100\n" in text,
               "metadata_output_chars": len(md.get("output") or ""),
               "metadata_keys": sorted(md), "title": st.get("title"),
               "input_keys": sorted(st.get("input") or {})}
        break
    return out


def write_manifest(outdir: Path, head: dict, by_id: dict[str, str]) -> dict:
    db = outdir / "opencode.db"
    con = open_ro(db)
    try:
        manifest = dict(head)
        manifest["schema"] = schema_facts(con)
        manifest["events"] = event_facts(con)
        manifest["truncated_output"] = output_shapes(con)
        manifest["row_shapes"] = row_shapes(con)
        manifest["canaries"] = canary_counts(con, outdir)
        manifest["tool_output_files"] = sorted(p.name for p in (outdir / "tool-output").iterdir()) \
            if (outdir / "tool-output").is_dir() else []
        manifest["sessions"] = sessions_facts(con, by_id)
    finally:
        con.close()
    manifest["files"] = {"opencode.db": db.stat().st_size}
    with open(outdir / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return manifest


def install(version: str) -> Path:
    out = subprocess.run(["bash", str(INSTALLER), version], check=True, stdout=subprocess.PIPE,
                         timeout=600).stdout.decode().strip().splitlines()
    return Path(out[-1])


def publish(sandbox: Sandbox, outdir: Path) -> Path:
    """Copies the checkpointed database and the spill files into OUTDIR (replacing what was there)."""
    db = sandbox.database()
    outdir.mkdir(parents=True, exist_ok=True)
    for name in ("opencode.db", "opencode.db-wal", "opencode.db-shm", "manifest.json", "README.md"):
        (outdir / name).unlink(missing_ok=True)
    shutil.rmtree(outdir / "tool-output", ignore_errors=True)
    shutil.copyfile(db, outdir / "opencode.db")
    spill = sandbox.data / "tool-output"
    if spill.is_dir() and any(spill.iterdir()):
        shutil.copytree(spill, outdir / "tool-output")
    return outdir / "opencode.db"


def relative(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(WORKSPACE))
    except ValueError:
        return str(p)


def cmd_make(version: str, outdir: Path, binary: Path | None) -> dict:
    binary = binary or install(version)
    with tempfile.TemporaryDirectory(prefix="opencode-probe.") as probe:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": probe, "XDG_DATA_HOME": probe + "/data",
               "XDG_CONFIG_HOME": probe + "/config", "XDG_STATE_HOME": probe + "/state",
               "XDG_CACHE_HOME": probe + "/cache", "OPENCODE_DISABLE_AUTOUPDATE": "1",
               "OPENCODE_DISABLE_MODELS_FETCH": "1"}
        found = subprocess.run([str(binary), "--version"], capture_output=True, timeout=120, env=env,
                               stdin=subprocess.DEVNULL).stdout.decode().strip()
    if found != version:
        raise SystemExit("%s reports version %r, expected %s" % (binary, found, version))
    model = ScriptedModel(version)
    port = model.start()
    sandbox = Sandbox(version, binary, port)
    started = time.monotonic()
    try:
        say("OpenCode %s in %s (model on 127.0.0.1:%d)" % (version, sandbox.root, port))
        result = run_scenarios(sandbox)
        db = sandbox.database()
        ck = checkpoint(db)
        published = publish(sandbox, outdir)
        command = "python3 scripts/opencode-fixtures/generate.py make %s %s" % (version, relative(outdir))
        scen = {k: v for k, v in result["scenarios"].items() if not k.startswith("_")}
        head = {
            "opencode_version": version,
            "package": "opencode-linux-x64@%s" % version,
            "generator": {"command": command, "script": "scripts/opencode-fixtures/generate.py",
                          "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "seconds": round(time.monotonic() - started, 1),
                          "scratch_dir": str(sandbox.root), "work_dir": str(sandbox.work),
                          "data_dir": str(sandbox.data), "network": network_note(),
                          "note": "paths stored in the database point into scratch_dir; tool-output/ here "
                                  "holds the spill files under the same names"},
            "scenarios_done": sorted(k for k, v in scen.items() if v["status"] == "done"),
            "scenarios_skipped": {k: v["reason"] for k, v in scen.items() if v["status"] != "done"},
            "scenarios": scen,
            "servers": {k[1:]: v for k, v in result["scenarios"].items() if k.startswith("_")},
            "checkpoint": ck,
            "model_requests": summarise_requests(model.requests),
        }
        by_id = {sid: key for key, sid in result["sessions"].items()}
        manifest = write_manifest(outdir, head, by_id)
        write_readme(outdir, manifest, command)
        problems = verify(outdir, manifest)
        manifest["verified"] = problems or "ok"
        with open(outdir / "manifest.json", "w") as f:
            json.dump(manifest, f, indent=1, ensure_ascii=False)
            f.write("\n")
        say("%s: %d bytes, scenarios done %s, skipped %s%s" % (
            relative(published), published.stat().st_size, head["scenarios_done"], head["scenarios_skipped"],
            "" if not problems else "; PROBLEMS: %s" % problems))
        return manifest
    finally:
        sandbox.close()
        model.stop()


def summarise_requests(requests: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for r in requests:
        key = r["answer"] + ("/" + r["kind"] if r.get("kind") else "")
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def verify(outdir: Path, manifest: dict) -> list[str]:
    """The claims of the manifest, checked against the database: integrity, scenarios, canaries."""
    problems: list[str] = []
    db = outdir / "opencode.db"
    res = subprocess.run(["sqlite3", "file:%s?immutable=1" % db, "PRAGMA integrity_check"], capture_output=True,
                         timeout=60)
    if res.stdout.decode().strip() != "ok":
        problems.append("integrity_check: %r" % res.stdout.decode().strip())
    for extra in ("opencode.db-wal", "opencode.db-shm"):
        if (outdir / extra).exists():
            problems.append("%s left beside the database" % extra)
    sessions = {s["scenario"]: s for s in manifest["sessions"] if s.get("scenario")}
    label = manifest.get("canary_version", manifest["opencode_version"])

    def parts(key: str) -> list[dict]:
        return [p for m in sessions[key]["messages"] for p in m["parts"]]

    def has_canary(key: str, kind: str, n: int) -> bool:
        want = "%s_CANARY_%s_%02d" % (kind, label, n)
        return any(want in p["canaries"] for p in parts(key))

    turns = {"a": [1], "b": [2, 3, 4], "c": [5], "d": [6, 7, 8]}
    for key in manifest["scenarios_done"]:
        letter = key[0]
        if letter not in sessions:
            problems.append("%s: no session in the database" % key)
            continue
        for n in turns.get(letter, []):
            for kind in ("TOOL", "REASONING", "TEXT"):
                if not has_canary(letter, kind, n):
                    problems.append("%s: no part holds %s canary of turn %d" % (key, kind, n))
        ps = parts(letter)
        if letter in "abcd":
            if not any(p.get("tool") == "bash" and p.get("status") == "completed" for p in ps):
                problems.append("%s: no completed bash part" % key)
            if not any(p["type"] == "reasoning" for p in ps):
                problems.append("%s: no reasoning part" % key)
        if letter == "b" and not any(p.get("truncated") for p in ps):
            problems.append("b: turn 4 was not truncated")
        if letter == "c" and not has_canary("c", "TOOL", 1):
            problems.append("c: the fork lacks the copied turn 1")
        if letter == "d":
            ms = sessions["d"]["messages"]
            if not any(p["type"] == "compaction" for p in ps):
                problems.append("d: no compaction part")
            if not any(m.get("summary") is True for m in ms):
                problems.append("d: no summary assistant message")
        if letter == "e":
            last = [m for m in sessions["e"]["messages"] if m["role"] == "assistant"]
            if not last or last[-1]["state"] != "incomplete":
                problems.append("e: the last assistant message is not incomplete")
    return problems


def write_readme(outdir: Path, manifest: dict, command: str) -> None:
    v = manifest["opencode_version"]
    up = manifest.get("upgrade")
    lines = []
    if up:
        lines.append("# OpenCode %s database upgraded in place by %s" % (up["from_version"], up["to_version"]))
        lines.append("")
        lines.append("The fixture `%s` (written by the real OpenCode %s), opened by the real OpenCode %s: "
                     "`opencode serve` on a copy, `GET /session`, `GET /session/{id}/message` for each listed "
                     "session, SIGTERM, then `PRAGMA wal_checkpoint(TRUNCATE)`. Old `message`/`part` rows keep "
                     "their old JSON shapes; what the upgrade changed is in `manifest.json` -> `upgrade`."
                     % (up["source"], up["from_version"], up["to_version"]))
    else:
        lines.append("# OpenCode %s fixture (version matrix)" % v)
        lines.append("")
        lines.append("A small database written by the real OpenCode %s (npm `opencode-linux-x64@%s`) against a "
                     "scripted local model, with the spill files it wrote (`tool-output/`) and `manifest.json` "
                     "(schema facts, scenarios done and skipped, every session, message and part with the "
                     "canaries it holds)." % (v, v))
        lines.append("")
        lines.append("Scenarios: (a) one turn with reasoning and a completed bash call; (b) three turns, the "
                     "last one truncated and spilled; (c) a fork of (a) plus one turn; (d) two turns, "
                     "`/summarize`, one more turn; (e) a turn killed (SIGKILL of the server) while bash ran "
                     "`sleep 300`, leaving an incomplete assistant message.")
        skipped = manifest.get("scenarios_skipped") or {}
        lines.append("")
        lines.append("Done: %s. Skipped: %s." % (", ".join(manifest["scenarios_done"]) or "none",
                                               "; ".join("%s (%s)" % kv for kv in skipped.items()) or "none"))
        lines.append("")
        lines.append("Canaries: `TOOL_CANARY_%s_NN` (bash output of turn NN), `REASONING_CANARY_%s_NN`, "
                     "`TEXT_CANARY_%s_NN` (closing text), `SUMMARY_CANARY_%s_S` (compaction summary)."
                     % (v, v, v, v))
    lines.append("")
    lines.append("Made with (from the repository root; the binary comes from `scripts/install-opencode.sh`):")
    lines.append("")
    lines.append("```sh")
    lines.append(command)
    lines.append("```")
    lines.append("")
    lines.append("`python3 scripts/opencode-fixtures/generate.py all` remakes every fixture of the matrix, the "
                 "upgraded ones last (they are made from the matrix fixtures). Ids and times differ at each run; "
                 "a running bash tool gets one snapshot event more or less depending on timing. "
                 "See `docs/opencode-versions.md`.")
    lines.append("")
    lines.append("Session directories and spill paths stored in the database point into `%s` (the "
                 "generator's scratch tree, wiped at each run)." % manifest["generator"]["scratch_dir"])
    (outdir / "README.md").write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------
# Upgrade in place.


def rows_by_id(db: Path, table: str) -> dict[str, str]:
    con = open_ro(db)
    try:
        if not con.execute("select 1 from sqlite_master where name=?", (table,)).fetchone():
            return {}
        return dict(con.execute('select id, data from "%s"' % table).fetchall())
    finally:
        con.close()


def cmd_upgrade(srcdir: Path, outdir: Path, binary: Path | None) -> dict:
    src_manifest = json.loads((srcdir / "manifest.json").read_text())
    from_version = src_manifest["opencode_version"]
    binary = binary or install(UPGRADE_TO)
    model = ScriptedModel(from_version)
    port = model.start()
    # the scratch tree of the source run again: its work tree is the directory the sessions name
    sandbox = Sandbox(from_version, binary, port)
    started = time.monotonic()
    try:
        sandbox.data.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(srcdir / "opencode.db", sandbox.data / "opencode.db")
        if (srcdir / "tool-output").is_dir():
            shutil.copytree(srcdir / "tool-output", sandbox.data / "tool-output")
        before = open_ro(srcdir / "opencode.db")
        try:
            facts_before = schema_facts(before)
        finally:
            before.close()
        proc, api = sandbox.start_server("serve-upgrade")
        listed = api.call("GET", "/session", timeout=60)
        read = {}
        for s in listed:
            read[s["id"]] = len(messages(api, s["id"]))
        how = stop_process(proc, signal.SIGTERM)
        db = sandbox.database()
        ck = checkpoint(db)
        publish(sandbox, outdir)
        after_db = outdir / "opencode.db"
        same = {}
        for table in ("message", "part"):
            old, new = rows_by_id(srcdir / "opencode.db", table), rows_by_id(after_db, table)
            same[table] = {"rows_before": len(old), "rows_after": len(new),
                           "identical": sum(1 for k, v in old.items() if new.get(k) == v),
                           "changed": sorted(k for k, v in old.items() if k in new and new[k] != v),
                           "missing": sorted(k for k in old if k not in new)}
        con = open_ro(after_db)
        try:
            facts_after = schema_facts(con)
        finally:
            con.close()
        mig = facts_after["migrations"]
        legacy = facts_before["migrations"].get("__drizzle_migrations", {})
        legacy_names = [n for n in legacy.get("names", []) if n]
        ids_after = set(mig.get("migration", {}).get("ids", []))
        before_cols = facts_before["session_columns"]
        command = "python3 scripts/opencode-fixtures/generate.py upgrade %s %s" % (relative(srcdir), relative(outdir))
        head = {
            "opencode_version": UPGRADE_TO,
            "canary_version": from_version,
            "package": "opencode-linux-x64@%s" % UPGRADE_TO,
            "generator": {"command": command, "script": "scripts/opencode-fixtures/generate.py",
                          "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "seconds": round(time.monotonic() - started, 1),
                          "scratch_dir": str(sandbox.root), "work_dir": str(sandbox.work),
                          "data_dir": str(sandbox.data), "network": network_note()},
            "upgrade": {
                "source": relative(srcdir), "from_version": from_version, "to_version": UPGRADE_TO,
                "server_stop": how,
                "sessions_listed_by_get_session": len(listed),
                "messages_read_per_session": read,
                "old_rows": same,
                "drizzle_migrations_before": {k: legacy.get(k) for k in ("columns", "rows", "last")},
                "drizzle_migrations_after": {k: mig.get("__drizzle_migrations", {}).get(k)
                                             for k in ("columns", "rows", "last")},
                "migration_table_after": {k: mig.get("migration", {}).get(k) for k in ("columns", "rows", "last")},
                "legacy_ids_copied_into_migration": sum(1 for n in legacy_names if n in ids_after),
                "legacy_ids_missing_from_migration": [n for n in legacy_names if n not in ids_after],
                "tables_added": sorted(set(facts_after["tables"]) - set(facts_before["tables"])),
                "tables_removed": sorted(set(facts_before["tables"]) - set(facts_after["tables"])),
                "session_columns_before": before_cols,
                "session_columns_after": facts_after["session_columns"],
                "session_columns_appended": facts_after["session_columns"][len(before_cols):]
                if facts_after["session_columns"][:len(before_cols)] == before_cols else None,
                "row_counts_before": facts_before["row_counts"],
            },
            "scenarios_done": src_manifest["scenarios_done"],
            "scenarios_skipped": src_manifest["scenarios_skipped"],
            "scenarios": src_manifest["scenarios"],
            "checkpoint": ck,
            "model_requests": summarise_requests(model.requests),
        }
        by_id = {s["id"]: s["scenario"] for s in src_manifest["sessions"] if s.get("scenario")}
        manifest = write_manifest(outdir, head, by_id)
        write_readme(outdir, manifest, command)
        problems = verify(outdir, manifest)
        if model.requests:
            problems.append("the upgrade run asked the model %d times" % len(model.requests))
        manifest["verified"] = problems or "ok"
        with open(outdir / "manifest.json", "w") as f:
            json.dump(manifest, f, indent=1, ensure_ascii=False)
            f.write("\n")
        say("%s: %d bytes%s" % (relative(after_db), after_db.stat().st_size,
                                "" if not problems else "; PROBLEMS: %s" % problems))
        return manifest
    finally:
        sandbox.close()
        model.stop()


def network_note() -> str:
    if os.environ.get(NETNS_ENV) == "1":
        return "own network namespace holding only loopback (unshare --net)"
    return "host network; npm/bun registry and HTTP(S) proxy variables point at the closed port 127.0.0.1:9"


def run_isolated(argv: list[str]) -> int | None:
    """Runs this script with `argv` in a new network namespace that has only loopback.

    None when that is not possible here (no unshare, not permitted, or already inside one), so that
    the caller runs in-process instead. The child gets SIGTERM at the deadline (it then stops its
    servers), SIGKILL 30 s later.
    """
    if os.environ.get(NETNS_ENV) == "1" or os.environ.get("OPENCODE_FIXTURES_NO_NETNS") == "1":
        return None
    if not shutil.which("unshare") or not shutil.which("ip"):
        return None
    try:
        if subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, timeout=30).returncode:
            return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    child = subprocess.Popen(["unshare", "--net", "--", sys.executable, str(Path(__file__).resolve()), *argv],
                             env=dict(os.environ, **{NETNS_ENV: "1"}))
    try:
        return child.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        say("%s did not finish in %d s: SIGTERM" % (" ".join(argv[:2]), RUN_TIMEOUT))
        child.terminate()
        try:
            return child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait(timeout=30)
    except BaseException:
        child.terminate()
        child.wait(timeout=30)
        raise


def make(version: str, outdir: Path, binary: Path | None) -> int:
    binary = binary or install(version)
    rc = run_isolated(["make", version, str(outdir), "--bin", str(binary)])
    if rc is not None:
        return rc
    return 0 if cmd_make(version, outdir, binary)["verified"] == "ok" else 1


def upgrade(srcdir: Path, outdir: Path, binary: Path | None) -> int:
    binary = binary or install(UPGRADE_TO)
    rc = run_isolated(["upgrade", str(srcdir), str(outdir), "--bin", str(binary)])
    if rc is not None:
        return rc
    return 0 if cmd_upgrade(srcdir, outdir, binary)["verified"] == "ok" else 1


def cmd_all(only: list[str]) -> int:
    versions = only or MATRIX
    binaries = {v: install(v) for v in versions + ([UPGRADE_TO] if UPGRADE_TO not in versions else [])}
    failures = []
    for v in versions:
        if make(v, fixture_dir_for(v), binaries[v]):
            failures.append("make %s" % v)
    for v in UPGRADE_FROM:
        if only and v not in only:
            continue
        if upgrade(fixture_dir_for(v), FIXTURES / ("opencode-%s-upgraded-%s" % (v, UPGRADE_TO)), binaries[UPGRADE_TO]):
            failures.append("upgrade %s" % v)
    if failures:
        say("FAILED: %s" % ", ".join(failures))
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="one release's fixture")
    mk.add_argument("version")
    mk.add_argument("outdir", type=Path)
    mk.add_argument("--bin", type=Path, help="the opencode binary (default: scripts/install-opencode.sh VERSION)")
    up = sub.add_parser("upgrade", help="open a made fixture with OpenCode %s" % UPGRADE_TO)
    up.add_argument("srcdir", type=Path)
    up.add_argument("outdir", type=Path)
    up.add_argument("--bin", type=Path, help="the opencode %s binary" % UPGRADE_TO)
    al = sub.add_parser("all", help="every fixture of the matrix into tests/fixtures/")
    al.add_argument("--only", nargs="*", default=[], help="only these versions")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    if os.environ.get(NETNS_ENV) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
    if args.cmd == "make":
        return make(args.version, args.outdir.resolve(), args.bin)
    if args.cmd == "upgrade":
        return upgrade(args.srcdir.resolve(), args.outdir.resolve(), args.bin)
    return cmd_all(args.only)


if __name__ == "__main__":
    sys.exit(main())
