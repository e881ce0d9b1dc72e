"""A test deployment controller for the API-server stand-in: it runs the queues' ambassador
Deployments (the ones `workqueue operator` makes) as local processes, and makes their Services
answer through the stand-in's Service proxy - so the operator's queues read their sources as
they would in a cluster.

For each Deployment labelled `workqueue.dev/ambassador-of`: its one container's `args` run as
`python -m kube_workqueue.manager.cli ARGS` (the image's entrypoint is `workqueue`) with
`--host`/`--port` replaced by loopback and a free port, its `env` set and its `envFrom`
Secrets' keys added (base64-decoded, as the kubelet does); a PersistentVolumeClaim mount is the
same path on this machine, as the test kubelet takes it. Once it answers /readyz, the Service
of the same name proxies to it (`ApiServer.endpoints`) and the Deployment's status says one
replica ready. A new pod template (its hash annotation) restarts the process, as a rollout
would; a deleted Deployment's process is stopped (SIGTERM) and its endpoint removed.

`processes` counts every process started, by Deployment, so a test can tell a restart.
"""

from __future__ import annotations

import base64
import os
import queue
import subprocess
import sys
import threading
import time

import requests

from .servers import free_port

AMBASSADOR_OF = "workqueue.dev/ambassador-of"
TEMPLATE_HASH = "workqueue.dev/ambassador-template"


class DeploymentRunner:
    def __init__(self, apiserver) -> None:
        self.apiserver = apiserver
        self.store = apiserver.store
        self.running: dict[tuple[str, str], tuple[subprocess.Popen, str]] = {}
        self.started: dict[tuple[str, str], int] = {}
        self._changes: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        self.store.hooks.append(self._on_change)

    def _on_change(self, kind: str, resource: str, obj: dict) -> None:
        if resource == "deployments" and AMBASSADOR_OF in (obj["metadata"].get("labels") or {}):
            self._changes.put((kind, obj))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                kind, obj = self._changes.get(timeout=0.2)
            except queue.Empty:
                continue
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            wanted = (obj["metadata"].get("annotations") or {}).get(TEMPLATE_HASH, "")
            current = self.running.get(key)
            if kind == "DELETED" or obj["metadata"].get("deletionTimestamp"):
                self._end(key)
            elif current is None or current[1] != wanted:
                self._end(key)
                self._start(key, obj, wanted)

    def _env(self, namespace: str, container: dict) -> dict[str, str]:
        env = dict(os.environ)
        for entry in container.get("env") or ():
            env[entry["name"]] = entry.get("value", "")
        for source in container.get("envFrom") or ():
            name = (source.get("secretRef") or {}).get("name")
            secret = self.store.objects.get(("secrets", namespace, name)) if name else None
            for k, v in ((secret or {}).get("data") or {}).items():
                env[k] = base64.b64decode(v).decode()
        return env

    def _start(self, key, obj: dict, template_hash: str) -> None:
        container = obj["spec"]["template"]["spec"]["containers"][0]
        port = free_port()
        args = [a for a in container["args"] if not a.startswith(("--host=", "--port="))]
        args += ["--host=127.0.0.1", f"--port={port}"]
        process = subprocess.Popen(
            [sys.executable, "-m", "kube_workqueue.manager.cli", *args],
            env=self._env(key[0], container),
            stdout=subprocess.DEVNULL,
        )
        self.running[key] = (process, template_hash)
        self.started[key] = self.started.get(key, 0) + 1
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if requests.get(url + "/readyz", timeout=2).ok:
                    break
            except requests.RequestException:  # refused, or slow to answer under load: probe again,
                pass  # as the kubelet does after a failed readiness probe
            time.sleep(0.05)
        if process.poll() is None:
            self.apiserver.endpoints[key] = url
            try:
                self.store.patch("deployments", key[0], key[1],
                                 {"status": {"replicas": 1, "readyReplicas": 1,
                                             "availableReplicas": 1}},
                                 "application/merge-patch+json", status_only=True)  # fmt: skip
            except Exception:  # deleted meanwhile
                pass

    def _end(self, key) -> None:
        self.apiserver.endpoints.pop(key, None)
        current = self.running.pop(key, None)
        if current is not None:
            current[0].terminate()
            try:
                current[0].wait(30)
            except subprocess.TimeoutExpired:
                current[0].kill()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for key in list(self.running):
            self._end(key)
