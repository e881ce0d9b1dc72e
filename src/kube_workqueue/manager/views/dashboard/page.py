"""The dashboard as HTML, rendered on the server: tables a person can read without JavaScript,
and the last hour as inline SVG charts.

The page is the shell (`page()`) around the board (`board_html()`); the script that ships
beside it fetches `ui/board` - the same `board_html()` - every second and swaps it in, so the
page updates itself with nothing rendered twice and no template in the browser.

Every piece of text that comes from outside - item names, reasons, log lines, the queue's
location - goes through `esc()` (HTML-escaped, quotes included) and nothing else is inserted:
an item named `<img src=x onerror=alert(1)>.mp4` is shown as those characters. URLs are
relative, so the page works behind a proxy that serves it under a path.
"""

from __future__ import annotations

import html
import re

from ...durations import human, moment
from ..queue_view import STATES
from .model import FAILED_SHOWN, Board, Series

WAITING_SHOWN = 50
RECENT_SHOWN = 10


def esc(value) -> str:
    """HTML-escaped, its control and format characters shown escaped (`\x1b`): an item's name
    is text to read, whatever it holds."""
    text = str(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return html.escape(text, quote=True)


_BREAK_AFTER = re.compile(r"([/_.\-]+)")


def name_html(name: str) -> str:
    """An item's name, escaped, that a narrow column wraps after its separators (`/`, `_`,
    `.`, `-`) rather than mid-word; a run of letters longer than the column still wraps."""
    parts = _BREAK_AFTER.split(str(name))
    return (
        '<span class="name">'
        + "".join(esc(part) + ("<wbr>" if k % 2 else "") for k, part in enumerate(parts))
        + "</span>"
    )


def page(board: Board) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>workqueue — {esc(board.view.where)}</title>
<link rel="stylesheet" href="ui/static/dashboard.css">
<link rel="icon" href="ui/static/favicon.svg" type="image/svg+xml">
</head>
<body>
<header>
<h1>workqueue</h1>
<p class="where">{esc(board.view.where)}</p>
<p id="live" class="live">a still page: live updates need JavaScript</p>
</header>
<main id="board">
{board_html(board)}
</main>
<script src="ui/static/dashboard.js" defer></script>
</body>
</html>
"""


def board_html(board: Board) -> str:
    view = board.view
    return "\n".join(
        [
            _counts(view.counts, view.paused_since, view.held, view.removals_held),
            _stability(board),
            _charts(board.series),
            _groups(board),
            _running(board),
            _waiting(board),
            _failed(board),
            _recent(board),
            _cancelled(board),
            _autoscaler(board),
            f'<p id="generated" data-generated="{view.now:.3f}">as of {esc(moment(view.now))}</p>',
        ]
    )


def _counts(counts: dict[str, int], paused_since: float | None, held: str | None,
            removals_held: str | None = None) -> str:  # fmt: skip
    cells = "".join(
        f'<div class="count" data-state="{esc(state)}"><span class="n">{counts.get(state, 0)}'
        f'</span> <span class="label">{esc(state)}</span></div>'
        for state in (*STATES, *sorted(set(counts) - set(STATES)))
    )
    paused = (
        f'<p class="paused">paused since {esc(moment(paused_since))}</p>' if paused_since else ""
    )
    if held:
        paused += f'<p class="held" role="alert">nothing new starts: {esc(held)}</p>'
    if removals_held:
        paused += f'<p class="held removals" role="alert">removals {esc(removals_held)}</p>'
    return f'<section id="counts" aria-label="items by state">{cells}</section>{paused}'


def _stability(board: Board) -> str:
    f = board.view.forecast
    if f.parallelism is None:
        rows = [("manager", "not running")]
    else:
        rows = [
            ("verdict", f.verdict or _no_verdict(f)),
            ("utilization", f"{f.utilization:.2f}" if f.utilization is not None else "-"),
            ("parallelism", str(f.parallelism)),
            (
                "recommended parallelism",
                str(f.recommended_parallelism) if f.recommended_parallelism else "-",
            ),
            ("mean service time", human(f.service_seconds)),
            ("mean interarrival", human(f.interarrival_seconds)),
            ("drains in", _drain(f.drain_seconds, board)),
        ]
    verdict = esc(f.verdict or "unknown")
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    return (
        f'<section id="stability" data-verdict="{verdict}"><h2>Stability</h2>'
        f"<dl>{body}</dl></section>"
    )


def _no_verdict(f) -> str:
    if f.service_seconds is None:
        return "not measured yet"
    return "no arrival rate yet: what waits is a backlog to drain"


def _drain(drain: float | None, board: Board) -> str:
    running = board.view.counts.get("running", 0)
    if drain is not None and drain < 0.5 and running:
        return "any moment: what runs has run past the mean"
    return human(drain)


def _table(section: str, title: str, heads: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """A section with a table; `rows` are (item name, cells already escaped)."""
    if not rows:
        return f'<section id="{section}"><h2>{esc(title)}</h2><p class="none">none</p></section>'
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    body = "".join(
        f'<tr data-item="{esc(name)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
        for name, cells in rows
    )
    return (
        f'<section id="{section}"><h2>{esc(title)}</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )


def _running(board: Board) -> str:
    now = board.view.now
    running = [i for i in board.view.items if i.state == "running"]
    rows = [
        (
            i.name,
            [
                name_html(i.name),
                esc(i.attempts),
                esc(human(now - i.since) if i.since else "-"),
                esc(i.reason),
            ],
        )
        for i in running
    ]
    return _table(
        "running", f"Running ({len(running)})", ["item", "attempt", "age", "reason"], rows
    )


def _groups(board: Board) -> str:
    """The queue's tenants (`--group`): what each runs and waits, its rules, what holds it;
    nothing when the queue has none."""
    groups = board.view.extra.get("groups") or {}
    if not groups:
        return ""
    rows = [
        (
            name,
            [
                esc(name),
                esc(g["running"]),
                esc(g["waiting"]),
                esc("-" if g["limit"] is None else g["limit"]),
                esc(g["rate"] or "-"),
                esc(g["held"] or "-"),
            ],
        )
        for name, g in groups.items()
    ]
    return _table("groups", f"Groups ({len(groups)})",
                  ["group", "running", "waiting", "limit", "rate", "held"], rows)  # fmt: skip


def _waiting(board: Board) -> str:
    line = board.view.waiting()
    grouped = bool(board.view.extra.get("groups"))
    rows = [
        (
            i.name,
            [
                esc(i.position),
                name_html(i.name),
                *([esc(i.group or "-")] if grouped else []),
                esc(i.priority),
                esc("in " + human(i.eta_seconds) if i.eta_seconds is not None else "unknown"),
                esc(i.reason),
            ],
        )
        for i in line[:WAITING_SHOWN]
    ]
    more = len(line) - WAITING_SHOWN
    html_ = _table(
        "waiting",
        f"Waiting ({len(line)})",
        [
            "position",
            "item",
            *(["group"] if grouped else []),
            "priority",
            "expected start",
            "reason",
        ],  # fmt: skip
        rows,
    )
    if more > 0:
        html_ = html_.replace("</section>", f'<p class="more">… and {more} more</p></section>')
    return html_


def _failed(board: Board) -> str:
    failed = [i for i in board.view.items if i.state == "failed" and i.position is None]
    failed.sort(key=lambda i: i.since or 0, reverse=True)
    rows = []
    for i in failed[:FAILED_SHOWN]:
        tail = board.log_tails.get(i.name)
        log = f'<pre class="log">{esc(chr(10).join(tail))}</pre>' if tail else esc(i.log or "-")
        rows.append(
            (
                i.name,
                [name_html(i.name), esc(i.reason), log],
            )
        )
    return _table("failed", f"Failed ({len(failed)})", ["item", "reason", "log tail"], rows)


def _cancelled(board: Board) -> str:
    """Items that left the source before their work was done (--cancel-removed); nothing
    when there are none."""
    gone = [i for i in board.view.items if i.state == "cancelled"]
    if not gone:
        return ""
    gone.sort(key=lambda i: i.since or 0, reverse=True)
    rows = [(i.name, [name_html(i.name), esc(i.reason)]) for i in gone[:RECENT_SHOWN]]
    return _table("cancelled", f"Cancelled ({len(gone)})", ["item", "reason"], rows)


def _recent(board: Board) -> str:
    done = [i for i in board.view.items if i.state == "succeeded" and i.since]
    done.sort(key=lambda i: i.since, reverse=True)
    rows = [
        (
            i.name,
            [
                name_html(i.name),
                esc(human(i.ran_seconds)),
                esc(moment(i.since)),
            ],
        )
        for i in done[:RECENT_SHOWN]
    ]
    return _table("recent", "Recently succeeded", ["item", "ran for", "finished"], rows)


def _autoscaler(board: Board) -> str:
    if not board.autoscale:
        f = board.view.forecast
        note = f"off: parallelism stays {f.parallelism}" if f.parallelism else "off"
        return f'<section id="autoscaler"><h2>Autoscaler</h2><p>{esc(note)}</p></section>'
    rows = [
        (
            str(d.at),
            [esc(moment(d.at)), esc(f"{d.before} → {d.after}"), esc(d.reason)],
        )
        for d in reversed(board.decisions)
    ]
    return _table("autoscaler", "Autoscaler decisions", ["at", "parallelism", "why"], rows)


# -- charts ----------------------------------------------------------------------------------

WIDTH, HEIGHT, PAD = 600, 220, 24


def _span(seconds: float) -> str:
    minutes = round(seconds / 60)
    return "hour" if minutes >= 60 else f"{minutes} min"


def _charts(series: Series) -> str:
    title = f"Last {_span(series.span_seconds)}"
    return f'<section id="charts"><h2>{title}</h2>{_throughput(series)}{_latency(series)}</section>'


def _throughput(s: Series) -> str:
    top = max([a + b for a, b in zip(s.succeeded, s.failed, strict=True)] + [1])
    step = (WIDTH - PAD) / len(s.succeeded)
    bars = []
    for k, (ok, bad) in enumerate(zip(s.succeeded, s.failed, strict=True)):
        x = PAD + k * step
        h_ok = (HEIGHT - PAD) * ok / top
        h_bad = (HEIGHT - PAD) * bad / top
        y = HEIGHT - PAD - h_ok
        if ok:
            bars.append(_rect(x, y, step - 1, h_ok, "ok", f"{ok} succeeded"))
        if bad:
            bars.append(_rect(x, y - h_bad, step - 1, h_bad, "bad", f"{bad} failed"))
    total = sum(s.succeeded) + sum(s.failed)
    per = "minute" if s.bucket_seconds == 60 else f"{s.bucket_seconds:g} s"
    return _figure(
        "throughput",
        f"items finished per {per} ({total} in the last {_span(s.span_seconds)}; peak {top})",
        "".join(bars),
        f"{top}/{'min' if s.bucket_seconds == 60 else per}",
        s.span_seconds,
    )


def _latency(s: Series) -> str:
    values = [v for v in s.latency_p95 + s.latency_p50 if v is not None]
    top = max(values + [1e-9])
    step = (WIDTH - PAD) / len(s.latency_p50)

    def line(points: list[float | None], css: str) -> str:
        coords = [
            f"{PAD + (k + 0.5) * step:.1f},{HEIGHT - PAD - (HEIGHT - PAD) * v / top:.1f}"
            for k, v in enumerate(points)
            if v is not None
        ]
        dots = "".join(
            f'<circle class="{css}" cx="{c.split(",")[0]}" cy="{c.split(",")[1]}" r="2.5"/>'
            for c in coords
        )
        return (f'<polyline class="{css}" points="{" ".join(coords)}"/>' if coords else "") + dots

    caption = "latency, first seen to finished: p50 (solid) and p95 (dashed)"
    return _figure(
        "latency",
        caption if values else f"{caption}: nothing finished in the last {_span(s.span_seconds)}",
        line(s.latency_p50, "p50") + line(s.latency_p95, "p95"),
        human(top) if values else "",
        s.span_seconds,
    )


def _rect(x: float, y: float, w: float, h: float, css: str, title: str) -> str:
    return (
        f'<rect class="{css}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 1):.1f}" '
        f'height="{h:.1f}"><title>{esc(title)}</title></rect>'
    )


def _figure(name: str, caption: str, marks: str, top_label: str, span: float) -> str:
    axis = (
        f'<line class="axis" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH}" y2="{HEIGHT - PAD}"/>'
        f'<text x="2" y="12">{esc(top_label)}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 6}">-{esc(_span(span).replace("hour", "60 min"))}</text>'
        f'<text x="{WIDTH - 30}" y="{HEIGHT - 6}">now</text>'
    )
    return (
        f'<figure id="chart-{name}"><svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{esc(caption)}">{axis}{marks}</svg>'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )
