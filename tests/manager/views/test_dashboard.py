"""The dashboard's rules, through the real stats server over HTTP on 127.0.0.1: who may look,
what is escaped, what ships; and the board's figures from an injected moment."""

from __future__ import annotations

import json

import pytest
import requests

from kube_workqueue.manager.ports import Row
from kube_workqueue.manager.views.dashboard import Dashboard, is_loopback
from kube_workqueue.manager.views.dashboard.model import Board, BoardCache, series
from kube_workqueue.manager.views.dashboard.page import board_html
from kube_workqueue.manager.views.queue_view import Context, build
from kube_workqueue.manager.views.stats_server import StatsServer

NOW = 1_800_000_000.0
EVIL = "<img src=x onerror=alert(1)>.mp4"
TOKEN = "s3cret-token-0123456789"


def a_board(now: float = NOW) -> Board:
    rows = [
        Row(EVIL, "failed", 1, now - 90, now - 80, now - 70, 3, None, "exit 3"),
        Row("ok.mp4", "succeeded", 1, now - 60, now - 50, now - 40, 0, None, None),
        Row("run.mp4", "running", 1, now - 30, now - 20, None, None, None, None),
        Row("wait.mp4", "pending", 0, now - 10, None, None, None, None, None),
    ]
    view = build("/state", rows, Context(now=now, parallelism=1))
    return Board(view, series(view.items, now), [], False, {EVIL: ["<script>x</script>"]})


@pytest.fixture
def serve():
    servers = []

    def start(host="127.0.0.1", token=None):
        dashboard = Dashboard(a_board, host=host, token=token)
        server = StatsServer(lambda: {"span": 0}, None, "127.0.0.1", 0, dashboard)
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield start
    for server in servers:
        server.stop()


def test_on_loopback_the_page_is_open_and_everything_outside_is_escaped(serve):
    url = serve()
    r = requests.get(url + "/", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "<img src=x" not in r.text and "<script>x" not in r.text
    assert "&lt;img src=x onerror=alert(1)&gt;.mp4" in r.text
    assert "&lt;script&gt;x&lt;/script&gt;" in r.text  # the log tail, escaped too
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert 'data-state="failed"><span class="n">1</span>' in r.text
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_the_board_and_its_json_and_the_shipped_files(serve):
    url = serve()
    fragment = requests.get(url + "/ui/board", timeout=5).text
    assert fragment.startswith('<section id="counts"') and "<html" not in fragment
    board = requests.get(url + "/ui/board.json", timeout=5).json()
    assert board["counts"] == {
        "pending": 1,
        "running": 1,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 0,
    }
    assert sum(board["series"]["succeeded"]) == 1 and sum(board["series"]["failed"]) == 1
    assert board["autoscaler"] == {"enabled": False, "decisions": []}
    js = requests.get(url + "/ui/static/dashboard.js", timeout=5)
    assert js.status_code == 200 and "ui/board" in js.text
    assert js.headers["Content-Type"].startswith("text/javascript")
    assert requests.get(url + "/ui/static/../__init__.py", timeout=5).status_code == 404
    assert requests.post(url + "/", timeout=5).status_code == 405


def test_beyond_loopback_without_a_token_it_says_so_at_start(caplog):
    """Served on 0.0.0.0 with no token, the page answers 403 to everyone: said once at start,
    where it started without a word."""
    import logging

    with caplog.at_level(logging.WARNING):
        Dashboard(a_board, host="0.0.0.0", token=None)
        Dashboard(a_board, host="127.0.0.1", token=None)  # (open on loopback: nothing to say)
        Dashboard(a_board, host="0.0.0.0", token=TOKEN)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("the dashboard on 0.0.0.0 has no token"), said


def test_beyond_loopback_without_a_token_the_page_is_off_and_metrics_stay_open(serve):
    url = serve(host="0.0.0.0")
    r = requests.get(url + "/", timeout=5)
    assert r.status_code == 403 and "--ui-token" in r.text and "WORKQUEUE_UI_TOKEN" in r.text
    assert requests.get(url + "/ui/board.json", timeout=5).status_code == 403
    assert requests.get(url + "/healthz", timeout=5).status_code == 200
    assert requests.get(url + "/stats", timeout=5).json() == {"span": 0}


def test_with_a_token_it_is_required_by_header_or_by_cookie(serve):
    url = serve(host="0.0.0.0", token=TOKEN)
    assert requests.get(url + "/", timeout=5).status_code == 401
    wrong = {"Authorization": "Bearer not-the-token-at-all"}
    assert requests.get(url + "/", headers=wrong, timeout=5).status_code == 401
    right = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.get(url + "/ui/board", headers=right, timeout=5).status_code == 200
    # a browser logs in once: the token leaves the address bar for an HttpOnly cookie
    session = requests.Session()
    r = session.get(url + "/?token=wrong", allow_redirects=False, timeout=5)
    assert r.status_code == 401 and "Set-Cookie" not in r.headers
    r = session.get(url + f"/?token={TOKEN}", allow_redirects=False, timeout=5)
    assert r.status_code == 303 and r.headers["Location"] == "./"
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    assert TOKEN not in cookie  # a value derived from the token, never the token
    assert session.get(url + "/", timeout=5).status_code == 200
    assert session.get(url + "/ui/board.json", timeout=5).status_code == 200
    forged = {"Cookie": f"workqueue_ui={TOKEN}"}  # the token itself is no session
    assert requests.get(url + "/", headers=forged, timeout=5).status_code == 401
    said = {}
    over_tls = {"PATH_INFO": "/", "QUERY_STRING": f"token={TOKEN}", "wsgi.url_scheme": "https"}
    Dashboard(a_board, host="0.0.0.0", token=TOKEN)(over_tls, lambda s, h: said.update(h))
    assert "; Secure" in said["Set-Cookie"]  # served over TLS: the cookie travels only so


@pytest.mark.parametrize(
    ("host", "answered"),
    [("127.0.0.1:9", True), ("localhost:9", True), ("[::1]:9", True), ("10.1.2.3", True),
     ("evil.example", False), ("evil.example:9", False), ("127.0.0.1.nip.io", False),
     ("dashboard.example.org", True)],
)  # fmt: skip
def test_a_host_name_not_ours_is_refused_dns_rebinding(host, answered):
    server = StatsServer(lambda: {"span": 0}, None, "127.0.0.1", 0,
                         Dashboard(a_board, host="127.0.0.1", token=None),
                         allowed_hosts=frozenset({"dashboard.example.org"}))  # fmt: skip
    try:
        for path in ("/", "/ui/board.json", "/stats", "/healthz"):
            r = requests.get(f"http://127.0.0.1:{server.port}{path}", headers={"Host": host},
                             timeout=5)  # fmt: skip
            assert (r.status_code != 421) == answered, (path, r.status_code)
            if not answered:
                assert EVIL not in r.text and "--allowed-host" in r.text
    finally:
        server.stop()


def test_a_token_is_required_on_loopback_too_once_set(serve):
    url = serve(token=TOKEN)
    assert requests.get(url + "/", timeout=5).status_code == 401


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_series_counts_the_last_hour_per_minute_and_quantiles():
    board = a_board()
    s = board.series
    assert len(s.succeeded) == 60 and s.start <= NOW < s.start + 3600
    assert sum(s.succeeded[-2:]) == sum(s.succeeded) == 1  # finished 40 s ago
    assert sum(s.failed[-3:]) == sum(s.failed) == 1  # finished 70 s ago
    latencies = [v for v in s.latency_p95 if v is not None]
    assert latencies == [20.0, 20.0]  # first seen to finished, for both
    old = series(a_board(NOW - 7200).view.items, NOW)  # two hours ago: out of the chart
    assert sum(old.succeeded) == sum(old.failed) == 0


def test_the_cache_builds_at_most_once_per_max_age():
    built = []
    clock = [0.0]
    cache = BoardCache(lambda: built.append(1) or a_board(), max_age=0.5, clock=lambda: clock[0])
    cache.get()
    cache.get()
    clock[0] = 0.4
    cache.get()
    assert len(built) == 1
    clock[0] = 0.6
    cache.get()
    assert len(built) == 2


def test_the_board_json_is_the_status_object_plus_series():
    body = json.loads(json.dumps(a_board().as_json()))
    assert {"counts", "items", "forecast", "series", "autoscaler"} <= set(body)
    assert "wait.mp4" in board_html(a_board())


def test_cancelled_items_are_counted_and_listed_with_their_reason():
    rows = [
        Row("gone.mp4", "cancelled", 0, NOW - 50, None, NOW - 40, None, None, None),
        Row("cut.mp4", "cancelled", 1, NOW - 30, NOW - 20, NOW - 10, None, None, None),
        Row("ok.mp4", "succeeded", 1, NOW - 60, NOW - 50, NOW - 40, 0, None, None),
    ]
    view = build("/state", rows, Context(now=NOW, parallelism=1))
    html = board_html(Board(view, series(view.items, NOW), [], False, {}))
    assert view.counts["cancelled"] == 2
    assert 'data-state="cancelled"><span class="n">2</span>' in html
    assert 'id="cancelled"' in html and "Cancelled (2)" in html
    assert "it left the source before it started" in html
    assert "it left the source (attempt 1 ended)" in html


def test_a_young_run_charts_its_own_minutes_not_an_empty_hour():
    from kube_workqueue.manager.views.dashboard.model import bucket_for

    board = a_board()
    items = board.view.items
    young = series(items, NOW, since=NOW - 120)  # the manager started two minutes ago
    assert young.bucket_seconds == 2 and young.span_seconds == 120
    assert sum(young.succeeded) == sum(board.series.succeeded)  # the same items, finer
    assert bucket_for(NOW, NOW - 5) == 2  # just started: its first two minutes
    assert bucket_for(NOW, NOW - 900) == 15  # a quarter of an hour in 60 bars
    assert bucket_for(NOW, NOW - 7200) == 60  # an old run: the last hour per minute
    assert bucket_for(NOW, None) == 60
    html = board_html(Board(board.view, young, [], False, {}))
    assert "<h2>Last 2 min</h2>" in html and "-2 min" in html


def test_long_names_wrap_after_their_separators_and_stay_escaped():
    from kube_workqueue.manager.views.dashboard.page import name_html

    html = name_html("camera-07/2026_12_01/<b>night</b>.mp4")
    assert html.startswith('<span class="name">') and "<b>" not in html
    assert (
        "camera-<wbr>07/<wbr>2026_<wbr>12_<wbr>01/<wbr>&lt;b&gt;night&lt;/<wbr>b&gt;.<wbr>mp4"
        in html
    )
