"""The in-process ambassador of `workqueue run`: it serves over real HTTP on loopback and its
stop() ends the serving thread itself, not after the loop's select() times out."""

from __future__ import annotations

import time

import requests
from waitress import create_server

from ambassador import create_app
from manager.cli.inprocess import FolderServer, serve_folder


def test_serves_the_folder_on_loopback(tmp_path):
    (tmp_path / "a.x").touch()
    server = serve_folder(str(tmp_path), [".x"], settle=0)
    try:
        server.wait_settled()
        assert server.url.startswith("http://127.0.0.1:")
        assert requests.get(server.url + "/api/v1/items", timeout=5).json()["items"] == ["a.x"]
    finally:
        server.stop()


def test_stop_wakes_the_loop_instead_of_waiting_out_its_timeout(tmp_path):
    app = create_app({"ROOT": str(tmp_path), "SUFFIXES": [".x"], "SETTLE": 0})
    # An hour-long select() timeout: only a wake-up from stop() can end the loop in time.
    waitress = create_server(app, host="127.0.0.1", port=0, threads=2, asyncore_loop_timeout=3600)
    server = FolderServer(app, waitress)
    with requests.Session() as session:  # leave a keep-alive connection open, as a run does
        assert session.get(server.url + "/healthz", timeout=5).status_code == 200
        time.sleep(0.3)  # the loop goes back to sleep in select() (stop() must wake it)
        server.stop()
    assert not server._thread.is_alive()
    assert not waitress._map  # listener, connections and trigger all closed
