"""In-memory fakes of the declared ports (`manager.ports`), for unit tests of the core: no HTTP,
no subprocess, no SQLite. Each behaves as the port's docstrings say, nothing more."""

from __future__ import annotations

from kube_workqueue.manager.ports import Outcome, Row, State


class FakeSource:
    base_url = "fake://source"

    def __init__(self, items: dict[str, dict]) -> None:
        self.items = dict(items)
        self.fetched: list[str] = []

    def list_items(self) -> list[str]:
        return sorted(self.items)

    def get_item(self, name: str):
        self.fetched.append(name)
        return self.items.get(name)

    def watch(self, timeout_seconds=None, read_timeout=None):
        for name in sorted(self.items):
            yield {"type": "ADDED", "item": name}

    def keep_data_of(self, wanted):
        return None

    def peek(self, name):
        return None

    def listed_work(self, waiting):
        return None

    def listed_priorities(self):
        return {n: d["priority"] for n, d in self.items.items() if d.get("priority")}


class FakeLedger:
    where = "memory"
    arrivals_known = True
    keeps_status = True  # what it is handed is looked at by tests

    def __init__(self) -> None:
        self.items: dict[str, dict] = {}
        self.retry_requests: list[str] = []
        self.transitions: list[tuple[str, str]] = []

    def state(self, name):
        item = self.items.get(name)
        return None if item is None else (item["state"], item["attempts"])

    def see(self, names):
        new = [n for n in dict.fromkeys(names) if n not in self.items]
        for n in new:
            self.items[n] = {"state": State.PENDING.value, "attempts": 0, "error": None}
        return new

    def priority(self, name):
        return (self.items.get(name) or {}).get("priority", 0)

    def prioritize(self, changes):
        for name, priority in changes.items():
            self.items[name]["priority"] = priority

    def start(self, name, log_path, version=None):
        item = self.items.setdefault(name, {"state": "pending", "attempts": 0, "error": None})
        item["version"] = version
        item.update(state=State.RUNNING.value, attempts=item["attempts"] + 1, log=log_path)
        self.transitions.append((name, "running"))
        return item["attempts"]

    def finish(self, name, succeeded, exit_code, error):
        state = State.SUCCEEDED if succeeded else State.FAILED
        self.items[name].update(state=state.value, exit_code=exit_code, error=error)
        self.transitions.append((name, state.value))

    def requeue(self, name):
        item = self.items[name]
        item.update(state=State.PENDING.value, attempts=max(0, item["attempts"] - 1))
        self.transitions.append((name, "pending"))

    def take_retry_requests(self):
        taken, self.retry_requests = self.retry_requests, []
        return taken

    def version_ran(self, name):
        return self.items.get(name, {}).get("version")

    def rerun(self, name, version):
        item = self.items.get(name)
        if item is None or item["state"] not in ("succeeded", "failed"):
            return False
        item.update(state="pending", attempts=0)
        return True

    def paused_since(self):
        return getattr(self, "paused", None)

    def wanted_parallelism(self):
        return getattr(self, "wanted", None)

    def removals_accepted(self):
        return getattr(self, "accepted", None)

    def removals_held_since(self):
        return getattr(self, "held_since", None)

    def hold_removals(self, since):
        self.held_since = since

    def want_parallelism(self, parallelism):
        self.wanted = parallelism

    def wanted_group_rules(self):
        return getattr(self, "group_rules", None)

    def want_group_rules(self, rules):
        self.group_rules = {**(self.wanted_group_rules() or {}), **rules}

    def report(self, status):
        self.reported = status

    def gave_up(self, name):
        return bool(self.items.get(name, {}).get("final"))

    def note_manager(self, facts):
        self.facts = facts

    def probe(self):
        return None

    def row(self, name):
        item = self.items.get(name)
        if item is None:
            return None
        return Row(name, item["state"], item["attempts"], 0.0, None, None, None, None, None)

    def rows(self, state=None):
        rows = [self.row(n) for n in sorted(self.items)]
        return [r for r in rows if state is None or r.state == state]

    def counts(self):
        out = {s.value: 0 for s in State}
        for item in self.items.values():
            out[item["state"]] += 1
        return out

    def close(self):
        return None


class FakeBackend:
    """Runs nothing: answers each run with the next scripted outcome for that item (success
    when none is scripted), and remembers what it was asked to run."""

    def __init__(self, script: dict[str, list[Outcome]] | None = None) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.runs: list[tuple[str, dict, int]] = []
        self.others = 0
        self.callbacks = []

    def log_path(self, name):
        return f"log/{name}"

    def run(self, name, data, attempt, cancel=None):
        self.runs.append((name, data, attempt))
        queue = self.script.get(name)
        if queue:
            outcome = queue.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return Outcome(True, exit_code=0)

    def shutdown(self, grace):
        return None

    def cancel_elsewhere(self, name):
        return False

    def others_running(self):
        return self.others

    def on_change(self, callback):
        self.callbacks.append(callback)
