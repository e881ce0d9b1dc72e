"""Every option a manager runs with, declared once: its flag, kind, default, help, and where
else a person may set it - a chart value, a WorkQueue field, an environment variable.

    RunOption("--max-attempts", MAX_ATTEMPTS, 3, "tries per item ...",
              field="max_attempts", chart="manager.maxAttempts", crd="maxAttempts")

A row is read by everything that turns a person's words into `ManagerOptions`:

  * the command line: `manager.cli.manager_cmd.add_run_options` makes each row a flag (its
    value parsed by the row's kind; `WORKQUEUE_<FLAG>` sets it from the environment);
  * the operator: `from_spec` reads each row's WorkQueue field through the same kind
    (`manager.operator.queue_spec`);
  * the chart: its `values.schema.json`, `values.yaml` and the manager's arguments in
    `templates/deployment.yaml` are held to the rows by `tests/charts/test_declared_options.py`,
    and the WorkQueue CRD's fields by the same test - a value the chart or the CRD admits that
    the flag refuses, or a row without its place, fails it;
  * the docs: the options table (docs/reference/options.md) is generated from the rows.

A `Kind` is one value's grammar, said twice: `parse` (a word to a typed value, `InputError` for
what cannot be one, the message without the flag's name) and `schema` (the JSON Schema that
admits the same words in a chart value or a WorkQueue field; its `examples` are checked to
pass both). Where a place takes a different range on purpose - a WorkQueue's `parallelism` may
be 0 (KEDA's scale to zero), `--parallelism` may not - the row names that place's own kind.

Adding a run option: a row here, its field on `ManagerOptions`, and its behaviour. The chart
value, the CRD field and their tests follow from the row (or the test says which is missing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..declared import spec_value
from ..durations import DURATION_PATTERN, parse_duration
from ..errors import InputError
from ..parallelism import MAX_PARALLELISM, parallelism_problem
from ..priority_rules import parse_rule
from ..retry import ITEM_BACKOFF_CAP
from ..tenancy import rules

Parse = Callable[[str], Any]


@dataclass(frozen=True)
class Kind:
    """One value's grammar: `parse` a word (raises `InputError`), `schema` the JSON Schema of
    the same words as a chart value or a WorkQueue field holds them, `examples` words both
    accept."""

    parse: Parse
    schema: Mapping[str, Any]
    examples: tuple[Any, ...]
    metavar: str | None = None
    stored: Callable[[Any], Any] | None = None  # the parsed value as its options field holds it

    def field_value(self, value: Any) -> Any:
        return value if self.stored is None or value is None else self.stored(value)

    def read(self, value: Any) -> Any:
        """A value as a chart or a WorkQueue holds it (a number, a string) through `parse`."""
        if (self.schema.get("type") == "boolean") != isinstance(value, bool):
            raise InputError(f"not a {self.schema.get('type')}: {value!r}")
        return value if isinstance(value, bool) else self.parse(str(value))


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"not a whole number: {text!r}") from None


def count(least: int, most: int | None = None) -> Kind:
    """A whole number from `least` (to `most`)."""

    def parse(text: str) -> int:
        value = _whole(text)
        if value < least:
            raise InputError(f"must be a whole number >= {least}: {text!r}")
        if most is not None and value > most:
            raise InputError(f"must be at most {most:,}: {text!r}")
        return value

    schema: dict[str, Any] = {"type": "integer", "minimum": least}
    if most is not None:
        schema["maximum"] = most
    return Kind(parse, schema, (least, most if most is not None else least + 1), "N")


def _parallelism(least: int) -> Kind:
    """A parallelism (`manager.parallelism`: one rule for every path it comes in by)."""

    def parse(text: str) -> int:
        value = _whole(text)
        if value < least:
            raise InputError(f"must be a whole number >= {least}: {text!r}")
        problem = parallelism_problem(value, least=least)
        if problem:
            raise InputError(problem)
        return value

    schema = {"type": "integer", "minimum": least, "maximum": MAX_PARALLELISM}
    return Kind(parse, schema, (least, MAX_PARALLELISM), "N")


def _fraction_below_one(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}") from None
    if not 0 <= value < 1:
        raise InputError(f"must be at least 0 and below 1: {text!r}")
    return value


def choice(*words: str) -> Kind:
    def parse(text: str) -> str:
        if text not in words:
            raise InputError(f"one of {', '.join(words)}: {text!r}")
        return text

    return Kind(parse, {"type": "string", "enum": list(words)}, words, "{" + ",".join(words) + "}")


def _rule(parse: Parse, pattern: str, examples: tuple[str, ...], metavar: str) -> Kind:
    return Kind(parse, {"type": "string", "pattern": pattern}, examples, metavar)


# A duration as `manager.durations` reads it: bare seconds, or NUMBER UNIT parts ("1h30m").
DURATION = Kind(parse_duration, {"type": "string", "pattern": DURATION_PATTERN},
                ("90", "500ms", "30s", "1.5h", "1h30m", "1d"), "D")  # fmt: skip
SECONDS = Kind(parse_duration, {"type": "number", "exclusiveMinimum": 0}, (10, 0.5), "SECONDS")


def _retry_delay(text: str) -> float:
    """A first retry's delay: a duration no longer than the longest wait a retry has (a longer
    one - `100d` - was taken, and a run waited five minutes a retry without a word)."""
    value = parse_duration(text)
    if value > ITEM_BACKOFF_CAP:
        raise InputError(f"at most {ITEM_BACKOFF_CAP / 60:g}m, the longest a retry ever waits "
                         f"(each failure doubles the wait, up to that): {text!r}")  # fmt: skip
    return value


RETRY_DELAY = Kind(_retry_delay, {"type": "string", "pattern": DURATION_PATTERN},
                   ("90", "500ms", "30s", "5m"), "D")  # fmt: skip
SWITCH = Kind(lambda text: text.lower() == "true", {"type": "boolean"}, (True, False))
PARALLELISM = _parallelism(1)
ASKED_PARALLELISM = _parallelism(0)  # a WorkQueue's: 0 holds the queue
FRACTION_BELOW_ONE = Kind(_fraction_below_one, {"type": "number", "minimum": 0,
                          "exclusiveMaximum": 1}, (0, 0.5), "F")  # fmt: skip
PRIORITY_RULE = _rule(parse_rule, r"^.+=\s*[-+]?[0-9]{1,10}\s*$",
                      ("urgent/*=10", "bulk-*=-5"), "GLOB=N")  # fmt: skip
LIMIT_RULE = _rule(rules.limit_rule, r"^.+=\s*[0-9]{1,4}\s*$", ("acme=2", "*=0"), "GLOB=N")
RATE_RULE = _rule(rules.rate_rule, r"^.+=\s*[0-9]+\s*/\s*[0-9.]*[a-zA-Z]+\s*$",
                  ("acme=100/1m", "*=5/s", "big=1/1.5h"), "GLOB=N/PERIOD")  # fmt: skip
WEIGHT_RULE = _rule(rules.weight_rule, r"^.+=\s*[0-9]*\.?[0-9]+\s*$",
                    ("gold-*=3", "bronze=0.5"), "GLOB=W")  # fmt: skip


def _host(text: str) -> str:
    """An address to bind: an IP address or a name this machine resolves."""
    import socket

    try:
        socket.getaddrinfo(text, None)
    except (socket.gaierror, UnicodeError, ValueError):
        raise InputError(f"not an address this machine can bind: {text!r}") from None
    return text


TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")


def bearer_token(text: str) -> str:
    """A bearer token (RFC 6750's characters), long enough not to be guessed."""
    if len(text) < 16 or not set(text) <= TOKEN_CHARS:
        raise InputError(
            "must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / = "
            "(e.g. from: openssl rand -hex 24)"
        )
    return text


HOST = Kind(_host, {"type": "string"}, ("127.0.0.1", "0.0.0.0"), "HOST")
HOST_NAME = Kind(str, {"type": "string"}, ("queue.example.com",), "NAME")
TOKEN = Kind(bearer_token, {"type": "string"}, ("0123456789abcdef0123",), "TOKEN")
FILE = Kind(str, {"type": "string"}, ("/etc/workqueue/ui/token",), "FILE")
PORT = count(0, 65535)
GROUP_REGEX = Kind(rules.group_pattern, {"type": "string"}, ("^([^/]+)/",), "REGEX",
                   stored=lambda compiled: compiled.pattern)  # fmt: skip


@dataclass(frozen=True)
class RunOption:
    """One option, everywhere it is set. `field`: its `ManagerOptions` field (`tenancy.` for
    `TenancyOptions`'), None when the command line uses it itself; `dest`: the parsed
    namespace's attribute (default: the flag's); `repeat`: the flag may be given many times
    (a chart value or a WorkQueue field is then a list); `chart`: the dotted values path;
    `crd`: the WorkQueue spec's dotted field; `chart_kind`/`crd_kind`: a place's own range;
    `chart_default`: the chart's own default (a pod watches its source: `--watch`);
    `section`: the help's group; `manager_only`: a flag of `workqueue manager` alone."""

    flag: str
    kind: Kind
    default: Any
    help: str
    field: str | None = None
    dest: str | None = None
    repeat: bool = False
    chart: str | None = None
    crd: str | None = None
    chart_kind: Kind | None = None
    crd_kind: Kind | None = None
    section: str | None = None
    manager_only: bool = False
    chart_default: Any = None  # the chart's own default, where a pod wants another

    def place_default(self, place: str) -> Any:
        if place == "chart" and self.chart_default is not None:
            return self.chart_default
        return self.default

    @property
    def name(self) -> str:
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    @property
    def switch(self) -> bool:
        return self.kind is SWITCH

    def place_kind(self, place: str) -> Kind:
        own = self.chart_kind if place == "chart" else self.crd_kind
        return own or self.kind

    def place_schema(self, place: str) -> dict[str, Any]:
        """The JSON Schema of this option's value at `place` ("chart" or "crd")."""
        one = dict(self.place_kind(place).schema)
        return {"type": "array", "items": one} if self.repeat else one

    def read(self, value: Any, place: str) -> Any:
        """The typed value of what `place` holds (a list when `repeat`)."""
        kind = self.place_kind(place)
        if self.repeat:
            return [kind.read(v) for v in value or ()]
        return kind.read(value)


REMOVALS = "a source that suddenly empties (with --cancel-removed)"

RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("--parallelism", PARALLELISM, 2, "units of work at once (default 2)",
              field="parallelism", chart="manager.parallelism", crd="parallelism",
              crd_kind=ASKED_PARALLELISM),
    RunOption("--max-attempts", count(1), 3,
              "tries per item before it stays failed (default 3)",
              field="max_attempts", chart="manager.maxAttempts", crd="maxAttempts"),
    RunOption("--priority", PRIORITY_RULE, [],
              "items whose name matches GLOB start before lower priorities (higher first; "
              "repeatable, the first match wins over the source's priority; default 0)",
              field="priorities", dest="priorities", repeat=True,
              chart="manager.priorities", crd="priorities"),
    RunOption("--group", GROUP_REGEX, None,
              "an item's group (tenant) is the first capture of REGEX on its name, e.g. "
              "'^([^/]+)/' (else the source's data.group; else none)",
              field="tenancy.group", chart="manager.group", crd="group"),
    RunOption("--limit", LIMIT_RULE, [],
              "at most N items of a matching group run at once, across the queue "
              "(repeatable, first match wins; '*=N' caps each group; 0 holds a group)",
              field="tenancy.limits", dest="limits", repeat=True,
              chart="manager.limits", crd="limits"),
    RunOption("--rate", RATE_RULE, [],
              "at most N starts of a matching group in any PERIOD, e.g. 'acme=100/1m' "
              "(repeatable, first match wins)",
              field="tenancy.rates", dest="rates", repeat=True,
              chart="manager.rates", crd="rates"),
    RunOption("--fair", SWITCH, False,
              "the next free slot goes to the group furthest below its (weighted) share of "
              "the running slots; priorities order items within a group",
              field="tenancy.fair", chart="manager.fair", crd="fair"),
    RunOption("--weight", WEIGHT_RULE, [],
              "with --fair: a matching group's share is W (default 1; repeatable)",
              field="tenancy.weights", dest="weights", repeat=True,
              chart="manager.weights", crd="weights"),
    RunOption("--retry-backoff", RETRY_DELAY, 1.0,
              "first retry delay, doubling per failure up to 5m (default 1s)",
              field="retry_backoff", crd="retryBackoff"),
    RunOption("--grace", DURATION, 10.0,
              "how long running work may finish on SIGTERM/SIGINT (default 10s)", field="grace"),
    RunOption("--autoscale", SWITCH, False,
              "move parallelism to the stability recommendation as times are measured",
              field="autoscale"),
    RunOption("--min-parallelism", PARALLELISM, 1, "autoscale floor (default 1)",
              field="min_parallelism", chart="autoscaling.minParallelism",
              chart_kind=ASKED_PARALLELISM, crd="autoscale.minParallelism",
              crd_kind=ASKED_PARALLELISM),  # (0 for KEDA and an HPA; builtin: the schema's 1)
    RunOption("--max-parallelism", PARALLELISM, None,
              "autoscale ceiling (default: --parallelism)",
              field="max_parallelism", chart="autoscaling.maxParallelism",
              crd="autoscale.maxParallelism"),
    RunOption("--scale-interval", DURATION, 30.0, "how often the autoscaler decides (default 30s)",
              field="scale_interval", chart="autoscaling.builtin.scaleInterval"),
    RunOption("--scale-down-delay", DURATION, 300.0,
              "how long a lower recommendation must hold before scaling down (5m)",
              field="scale_down_delay", chart="autoscaling.builtin.scaleDownDelay"),
    RunOption("--scale-window", DURATION, 600.0,
              "how far back arrivals and service times are measured (default 10m)",
              field="window"),
    RunOption("--on-change", choice("ignore", "rerun"), "ignore",
              "a finished item whose version changes (new bytes, a new upload): ignore it "
              "(default) or run it again", field="on_change", crd="onChange"),
    RunOption("--wait-for", DURATION, 30.0,
              "--once: when no item left may run here - its need offered by no live manager, "
              "its group held at 0, the queue paused or at parallelism 0 - end after this long "
              "(exit 4), saying why; a live manager that will run them keeps the run waiting "
              "(default 30s)", field="wait_for"),
    RunOption("--cancel-removed", SWITCH, False,
              "an item that leaves the source is cancelled: never started if it waits, ended "
              "if it runs (told only by a newer complete listing or a DELETED event)",
              field="cancel_removed", crd="cancelRemoved"),
    RunOption("--removal-hold", DURATION, 300.0,
              "how long such a loss must persist before its items are cancelled (default 5m)",
              field="removal_hold", section=REMOVALS),
    RunOption("--mass-removal-fraction", FRACTION_BELOW_ONE, 0.5,
              "the share of known items lost at once that is held (default 0.5)",
              field="mass_removal_fraction", section=REMOVALS),
    RunOption("--mass-removal-min", count(1), 10,
              "the fewest items lost at once that are held, unless all are (default 10)",
              field="mass_removal_min", section=REMOVALS),
    RunOption("--accept-removals", SWITCH, False,
              "hold nothing: act on every removal at once, however many items leave together",
              section=REMOVALS),
    RunOption("--poll-interval", DURATION, 10.0,
              "time between polls, jittered by ±20%% (default 10s)", field="poll_interval",
              chart="manager.pollIntervalSeconds", chart_kind=SECONDS, crd="pollInterval",
              manager_only=True),
    RunOption("--watch", SWITCH, False,
              "follow the source's watch stream instead of polling", field="watch",
              chart="manager.watch", chart_default=True, manager_only=True),
    RunOption("--metrics-port", PORT, None,
              "serve the dashboard (/), /metrics, /stats and /healthz on this port (0 = any free)",
              chart="manager.metricsPort", chart_kind=count(1, 65535)),
    RunOption("--metrics-host", HOST, "127.0.0.1",
              "the address --metrics-port binds (default 127.0.0.1; 0.0.0.0 in a pod)"),
    RunOption("--allowed-host", HOST_NAME, [],
              "a host name the endpoint answers to besides its addresses and localhost (an "
              "Ingress's, a Service's); any other is refused (DNS rebinding); repeatable",
              repeat=True, chart="dashboard.allowedHosts"),
    RunOption("--ui-token", TOKEN, None,
              "bearer token the dashboard at / asks for (required to see it when "
              "--metrics-host is beyond loopback; /metrics stays open): from WORKQUEUE_UI_TOKEN "
              "only - on the command line every user of the machine reads it"),
    RunOption("--ui-token-file", FILE, None,
              "read --ui-token from this file (a mounted Secret: kept out of the environment)"),
)  # fmt: skip

BY_FLAG = {row.flag: row for row in RUN_OPTIONS}


def from_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """{row.name: typed value} of every row whose WorkQueue field `spec` sets; `InputError`
    naming the field (`spec.maxAttempts: ...`) for a value its kind refuses."""
    values: dict[str, Any] = {}
    for row in RUN_OPTIONS:
        if row.crd is None:
            continue
        value = spec_value(spec, row.crd)
        if value is None:
            continue
        try:
            values[row.name] = row.read(value, "crd")
        except InputError as exc:
            raise InputError(f"spec.{row.crd}: {exc}") from None
    return values


def options_fields(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """({ManagerOptions field: value}, {TenancyOptions field: value}) of typed `values`
    ({row.name: value}); rows without a field are the caller's."""
    manager: dict[str, Any] = {}
    tenancy: dict[str, Any] = {}
    for row in RUN_OPTIONS:
        if row.field is None or row.name not in values:
            continue
        into, _, name = row.field.rpartition(".")
        value = values[row.name]
        if row.repeat:
            value = [row.kind.field_value(v) for v in value]
        else:
            value = row.kind.field_value(value)
        (tenancy if into == "tenancy" else manager)[name] = value
    return manager, tenancy
