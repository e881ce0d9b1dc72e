"""`workqueue operator`'s mistakes: one line and exit 2 - a cluster without the WorkQueue CRD,
an API that does not answer, a template that is not one."""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.e2e.conftest import workqueue
from tests.support.apiserver import ApiServer
from tests.support.servers import free_port


def test_a_cluster_without_the_crd_is_one_line(tmp_path):
    server = ApiServer().start()
    try:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        done = workqueue("operator", "--namespace", "media", "--kubeconfig", kubeconfig,
                         timeout=60)  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "workqueue operator: error: the WorkQueue CRD (workqueue.dev/v1beta1) is not installed: "
        "kubectl apply -f charts/workqueue/crds/"
    ]


def test_an_api_that_does_not_answer_and_a_bad_template_are_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{free_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    down = workqueue("operator", "--all-namespaces", "--kubeconfig", str(kubeconfig), timeout=120)
    assert down.returncode == 2  # (a warning as the outage starts, as every client of it logs)
    assert (
        down.stderr.strip()
        .splitlines()[-1]
        .startswith("workqueue operator: error: cannot reach the Kubernetes API: ")
    )
    bad = workqueue("operator", "--all-namespaces", "--kubeconfig", str(kubeconfig),
                    "--ambassador-url", "http://{svc}.{namespace}", timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--ambassador-url" in bad.stderr
    assert "Traceback" not in down.stderr + bad.stderr


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--health-port", "99999"), "from 1 to 65535"),
        (("--workers", "0"), "from 1 to 64"),
        (("--kube-api-qps", "-1"), ">= 0"),
        (("--ambassador-url", "notaurl"), "http(s)://"),
        (("--image", "UPPER CASE"), "not an image reference"),
        (("--lease", "a/b", "--no-lease"), "not allowed with"),
        (("--health-host", "not a host", "--health-port", "8089"), "not an address"),
    ],
)
def test_each_flag_mistake_is_one_line_before_anything_starts(flags, words):
    """Checked where they are typed: none reaches the cluster (no kubeconfig is needed to
    be told) and none is taken to fail later (a probe that never binds, a pod that never
    pulls its image)."""
    from kube_workqueue.manager.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(["operator", "--namespace", "media", *flags])
    assert done.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
