"""Sessions the docs show, replayed for real and compared with what the page prints - the same
bytes, once what differs from run to run (ports, folders, the listing's version, times, digests)
is made alike. So the pages cannot drift from what the commands answer (they had: an item's
`version` was missing from the ambassador's session, `cancelled` from the ledger's).

  docs/sources.md     the folder ambassador: five `curl`s, the watch included; a Redis stream's,
                      a JetStream stream's and a Kafka topic's records and what their
                      ambassadors answer; a Cloud Storage bucket's and an Azure container's
  docs/running.md     a ledger emptied by accident: `status` refuses it, `ledger restore`,
                      `ledger check`
  docs/sharing.md     a local ledger moved into a shared one (a real PostgreSQL), and a retry
                      there
  docs/getting-started.md
                      the five-minute tour's videos (its broken.mp4 included) and its run
"""

from __future__ import annotations

import http.client
import re
import shlex
import threading
import time
from pathlib import Path

import pytest

from tests.support.servers import free_port, wait_until

from .conftest import spawn_workqueue, workqueue

REPO = Path(__file__).resolve().parents[2]
SHOWN_ROOT = "/tmp/vids"


def shown_session(page: str, first: str) -> list[tuple[str, str]]:
    """(command, output) of the console block of docs/`page` whose first command starts with
    `first`."""
    text = (REPO / "docs" / page).read_text()
    block = re.search(r"```console\n(\$ " + re.escape(first) + r".*?)```", text, re.DOTALL)
    assert block, f"docs/{page} no longer shows the session that starts with {first!r}"
    parts = re.split(r"^\$ (.*)\n", block.group(1), flags=re.MULTILINE)[1:]
    return list(zip(parts[0::2], parts[1::2], strict=True))


def get(port: int, path: str) -> str:
    """The body of GET `path`, sent as it is (as `curl --path-as-is`: no `..` taken out)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        return connection.getresponse().read().decode()
    finally:
        connection.close()


def asked_path(command: str) -> str:
    """The path a shown `curl … localhost:8080/PATH …` asks for."""
    return re.search(r"localhost:8080(\S*)", command).group(1)


def alike(text: str, root: str, port: int) -> str:
    text = text.replace(root, SHOWN_ROOT).replace(f":{port}", ":8080")
    text = re.sub(r'"resourceVersion":"\d+"', '"resourceVersion":"N"', text)
    text = re.sub(r'"modified":"[^"]+"', '"modified":"T"', text)
    return re.sub(r'"version":"s-[0-9a-f]{16}"', '"version":"s-V"', text)


def test_the_sources_page_shows_what_the_ambassador_answers(tmp_path, ambassador_server):
    root = tmp_path / "vids"
    root.mkdir()
    (root / "a.mp4").write_bytes(b"\0" * 1048576)
    (root / "b.MP4").write_bytes(b"\0" * 10)
    server = ambassador_server(root, "--suffix", ".mp4")
    session = shown_session("sources.md", "workqueue ambassador --root")
    assert session[0][0].startswith("workqueue ambassador --root /tmp/vids")
    checked = 0
    for command, output in session[1:]:
        path = re.search(r"'?localhost:8080([^' ]*)'?", command).group(1)
        if "watch=true" in path:
            touch = threading.Timer(1.0, (root / "c.mp4").write_bytes, args=(b"x",))
            touch.start()  # `# then: touch /tmp/vids/c.mp4`
            started = time.monotonic()
            answer = get(server.port, path)
            touch.join()
            assert time.monotonic() - started < 20
        else:
            answer = get(server.port, path) + "\n"
        got = alike(answer, str(root), server.port)
        assert got.strip() == alike(output, SHOWN_ROOT, 8080).strip(), command
        checked += 1
    assert checked == 5


def test_the_running_page_shows_what_a_ledger_accident_answers(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("a.mp4", "b.mp4", "c.mp4"):
        (videos / name).write_bytes(b"x")
    assert workqueue("run", videos, "--settle", "0", "--", "true", cwd=tmp_path).returncode == 0
    session = shown_session("running.md", ": > .workqueue/ledger.sqlite3")
    (tmp_path / ".workqueue" / "ledger.sqlite3").write_bytes(b"")  # `: > …`: the accident
    for command, output in session[1:]:
        done = workqueue(*shlex.split(command)[1:], cwd=tmp_path)
        printed = (done.stdout + done.stderr).strip()
        assert stamped(printed, str(tmp_path)) == stamped(output.strip(), "/tmp/ex"), command
    assert len(session) == 4


def stamped(text: str, where: str) -> str:
    """`text` with its folder and its moments made alike."""
    text = text.replace(where, "/tmp/ex")
    return re.sub(r"\d{8}T\d{6}(\.\d+)?", "STAMP", text)


def test_the_sharing_page_shows_what_moving_a_ledger_in_answers(tmp_path, postgres):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("a.mp4", "b.mp4", "broken.mp4"):
        (videos / name).write_bytes(b"x")
    worker = tmp_path / "worker.sh"
    worker.write_text('#!/bin/sh\ngrep -q broken "$WORK_ITEM_FILE" && exit 3\nexit 0\n')
    worker.chmod(0o755)
    state = tmp_path / "state"
    ran = workqueue("run", videos, "--settle", "0", "--state-dir", state, "--max-attempts", "1",
                    "--", worker)  # fmt: skip
    assert ran.returncode == 1  # broken.mp4 failed
    session = shown_session("sharing.md", "workqueue ledger migrate")
    shown_url = "postgresql://wq@db.example/thumbs"
    for command, output in session:
        command = command.replace("/srv/.workqueue", str(state)).replace(shown_url, postgres)
        done = workqueue(*shlex.split(command)[1:])
        printed = (done.stdout + done.stderr).strip()
        printed = printed.replace(str(state), "/srv/.workqueue").replace(postgres, shown_url)
        assert done.returncode == 0 and printed == output.strip(), command
    assert len(session) == 2


def test_the_getting_started_tour_makes_the_broken_video_it_asks_about(tmp_path, ffmpeg_env):
    """docs/getting-started.md's five minutes, replayed (two videos instead of eight): the
    videos it makes include the broken.mp4 its next steps ask `status` and `retry` about."""
    import subprocess
    import sys

    (make, _), (run, rest) = shown_session("getting-started.md", "python examples/")
    if run.rstrip().endswith("\\"):  # a command continued on the next line
        run = run.rstrip()[:-1] + " " + rest.strip()
    argv = shlex.split(make.split("#")[0])
    assert argv[:2] == ["python", "examples/thumbnailer/make_videos.py"], argv
    subprocess.run([sys.executable, str(REPO / argv[1]), *[str(tmp_path / a) if a == "videos"
                    else a for a in argv[2:]], "--count", "2", "--seconds", "1"],
                   check=True, env=ffmpeg_env, capture_output=True, timeout=120)  # fmt: skip
    assert (tmp_path / "videos" / "broken.mp4").exists()
    words = shlex.split(run)
    assert words[0].startswith("OUTPUT_DIR=") and words[1:3] == ["workqueue", "run"], words
    env = {**ffmpeg_env, "OUTPUT_DIR": str(tmp_path / "thumbnails")}
    command = [str(REPO / w) if w.startswith("worker-images/") else w for w in words[2:]]
    cut = command.index("--")  # (the state directory's flag before the worker's command)
    command[cut:cut] = ["--state-dir", str(tmp_path / "state")]
    done = workqueue(*command, env=env, cwd=tmp_path, timeout=180)
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
    said = workqueue("status", "broken.mp4", "--state-dir", tmp_path / "state")
    assert said.returncode == 0 and "failed" in said.stdout, said.stderr


def readme_sessions(first: str) -> list[str]:
    """The commands of README.md's console block whose first command starts with `first`,
    each whole (a command continued on the next line joined), comments left out."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```console\n(\$ " + re.escape(first) + r".*?)```", text, re.DOTALL)
    assert block, f"README.md no longer shows the session that starts with {first!r}"
    joined = block.group(1).replace("\\\n", " ")
    return [line[2:].split("  #")[0].strip() for line in joined.splitlines()
            if line.startswith("$ ")]  # fmt: skip


def test_the_readme_tour_runs_as_typed(tmp_path, ffmpeg_env):
    """README.md's five-minute tour, every command as typed but the two that set up this
    checkout (`make demo`, the venv's activate): in a folder of its own that sees the
    repository's examples and workers where the tour names them. It broke at its third
    command: the videos it made had no broken.mp4 for `status` and `retry` to name."""
    import subprocess
    import sys

    for part in ("examples", "worker-images"):
        (tmp_path / part).symlink_to(REPO / part)
    tour = readme_sessions("make demo") + readme_sessions("workqueue status")
    assert tour[:2] == ["make demo", ". .venv/bin/activate"], tour
    env = {**ffmpeg_env, "PWD": str(tmp_path)}
    codes = []
    for command in tour[2:]:
        words = shlex.split(command.replace("$PWD", str(tmp_path)))
        assigned = {}
        while "=" in words[0] and not words[0].startswith("-"):
            key, _, value = words.pop(0).partition("=")
            assigned[key] = value
        if words[0] == "python":
            done = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, capture_output=True,
                                  text=True, env={**env, **assigned}, timeout=240)  # fmt: skip
        else:
            assert words[0] == "workqueue", command
            done = workqueue(*words[1:], cwd=tmp_path, env={**env, **assigned}, timeout=240)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        codes.append((command.split()[:3], done.returncode))
        if "status broken.mp4" in command:
            assert "failed" in done.stdout, done.stdout
    assert [code for _, code in codes] == [0, 1, 0, 0, 0, 0], codes  # (the run: one failed)
    assert (tmp_path / "thumbnails").is_dir()


def test_the_sources_page_shows_what_a_stream_ambassador_answers(redis_store, ambassador_server):
    """The Redis stream session of docs/sources.md, replayed: each XADD for real (the ids it
    gave made alike in order), then the ambassador's answers."""
    import redis as redis_client

    session = shown_session("sources.md", "redis-cli XADD renders")
    client = redis_client.Redis(port=redis_store.port, decode_responses=True)
    key = f"renders-{time.monotonic_ns()}"
    ids: dict[str, str] = {}  # the id given -> the id shown
    rest = []
    for command, output in session:
        words = shlex.split(command)
        if words[0] == "redis-cli":
            fields = dict(zip(words[4::2], words[5::2], strict=True))
            ids[client.xadd(key, fields)] = output.strip()
        else:
            rest.append((command, output))
    (serve, said), *asks = rest
    server = ambassador_server(f"{redis_store.url}?stream={key}&name=file")
    assert said.strip() == "workqueue ambassador: serving redis stream 'renders' on " \
        "http://127.0.0.1:8080" and "stream=renders&name=file" in serve  # fmt: skip
    for command, output in asks:
        path = asked_path(command)
        answer = get(server.port, path).replace(key, "renders")
        for given, shown in ids.items():
            answer = answer.replace(given, shown)
        assert answer.strip() == output.strip(), command
    assert len(asks) == 2


def same_life(answer: str, shown: str) -> str:
    """`answer` with its log's identity - its token, tag and time, which are the server's
    own each run (a stream's created time, a topic's id) - as `shown` names it."""
    for key in ("identity", "tag", "since", "logIdentity"):
        said = re.search(rf'"{key}":"([^"]*)"', shown)
        got = re.search(rf'"{key}":"([^"]*)"', answer)
        if said and got:
            answer = answer.replace(got.group(1), said.group(1))
    return answer


def test_the_sources_page_shows_what_a_jetstream_ambassador_answers(nats_store, ambassador_server):
    """The NATS JetStream session of docs/sources.md, replayed: the stream made and each `nats
    pub` sent for real (a stream and subjects of this test's own, named back as shown), then
    the ambassador's answers."""
    session = shown_session("sources.md", "nats stream add RENDERS")
    own = f"R{time.monotonic_ns()}"
    stream, prefix = own, own.lower()
    rest = []
    for command, output in session:
        words = shlex.split(command)
        if words[:3] == ["nats", "stream", "add"]:
            assert words[3:] == ["RENDERS", "--subjects", "renders.>", "--defaults"], words
            nats_store.add_stream(stream, [f"{prefix}.>"])
        elif words[:2] == ["nats", "pub"]:
            headers = dict(w.split(":", 1) for w in words[words.index("-H") + 1 :][:1]) \
                if "-H" in words else None  # fmt: skip
            subject = words[2].replace("renders", prefix, 1)
            nats_store.publish(subject, words[3].encode(), headers)
        else:
            rest.append((command, output))
            continue
        assert output.strip() == "", command  # (the nats CLI's own lines are left out)
    (serve, said), *asks = rest
    assert said.strip() == "workqueue ambassador: serving nats stream 'RENDERS' on " \
        "http://127.0.0.1:8080" and "/RENDERS?subject=renders.>&name=subject" in serve  # fmt: skip
    server = ambassador_server(f"{nats_store.url}/{stream}?subject={prefix}.>&name=subject")
    for command, output in asks:
        path = asked_path(command)
        if "| grep" in command:  # the lines the grep keeps, once a scrape has them (seen once
            # under a loaded suite: a scrape without them; the log contract's metrics test
            # waits for them the same way)

            def kept(path: str = path) -> str:
                return "\n".join(line for line in get(server.port, path).splitlines()
                                 if line.startswith("ambassador_log_"))  # fmt: skip

            answer = wait_until(kept, timeout=30)
        else:
            answer = get(server.port, path).replace(f'"{stream}"', '"RENDERS"')
            answer = same_life(answer.replace(f'"{prefix}.', '"renders.'), output)
        assert answer.strip() == output.strip(), command
    assert len(asks) == 3


def test_the_sources_page_shows_what_a_kafka_ambassador_answers(kafka_store, ambassador_server):
    """The Kafka session of docs/sources.md, replayed: the topic made and each `kcat -P` line
    produced for real by the same client library kcat is built on (librdkafka: so each key
    lands on the partition shown), then the ambassador's answers."""
    session = shown_session("sources.md", "kafka-topics.sh")
    topic = f"renders-{time.monotonic_ns()}"
    rest = []
    for command, output in session:
        if command.startswith("kafka-topics.sh"):
            assert "--topic renders --partitions 3" in command, command
            kafka_store.create_topic(topic, 3)
            assert output.strip() == "Created topic renders."
            continue
        if "| kcat -P" in command:
            line = shlex.split(command)[1]
            key, _, value = line.partition(":")
            null = " -Z " in command and not value  # kcat -Z: an empty value is a null
            kafka_store.produce(topic, [(key, None if null else value, None)])
            assert output.strip() == "", command
            continue
        rest.append((command, output))
    (serve, said), *asks = rest
    assert said.strip() == "workqueue ambassador: serving kafka topic 'renders' on " \
        "http://127.0.0.1:8080" and "/renders?name=key" in serve  # fmt: skip
    server = ambassador_server(f"{kafka_store.url}/{topic}?name=key")
    for command, output in asks:
        path = asked_path(command)
        answer = get(server.port, path).replace(f'"{topic}"', '"renders"')
        assert same_life(answer, output).strip() == output.strip(), command
    assert len(asks) == 2


@pytest.mark.parametrize(
    ("kind", "first"),
    [
        ("gcs", "export STORAGE_EMULATOR_HOST="),
        ("azure", "export AZURE_STORAGE_CONNECTION_STRING="),
    ],
)
def test_the_sources_page_shows_what_a_cloud_bucket_ambassador_answers(kind, first, request,
                                                                       monkeypatch):  # fmt: skip
    """The Cloud Storage and Azure Blob sessions of docs/sources.md, replayed against the
    emulators: the page's two objects (its bytes: 1,024 zero bytes and 1,024 ones, so the MD5
    and the version shown are what the store computes), every command run for real."""
    store = request.getfixturevalue("gcs_emulator" if kind == "gcs" else "azurite")
    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    session = shown_session("sources.md", first)
    (exported, _), (serve, said), *asks, (refused, error) = session
    container = f"media-{time.monotonic_ns()}"  # the page's `media-in`, unique per run
    if kind == "gcs":
        store.client().create_bucket(container)
    else:
        store.service().create_container(container)
    store.put(container, "videos/a.mp4", b"\0" * 1024)
    store.put(container, "videos/b c.mp4", b"\1" * 1024)
    argv = [a.replace("media-in", container) for a in shlex.split(serve)[1:]]
    port = free_port()
    argv[argv.index("--port") + 1] = str(port)
    server = spawn_workqueue(*argv)
    try:
        line = server.stdout.readline().replace(container, "media-in")
        assert line.strip().replace(f":{port}", ":8080") == said.strip()
        wait_until(lambda: get(port, "/readyz").strip() == "ok", timeout=60)
        for command, output in asks:
            answer = get(port, asked_path(command)).replace(container, "media-in")
            assert (
                alike(answer, SHOWN_ROOT, port).strip() == alike(output, SHOWN_ROOT, port).strip()
            )
    finally:
        server.terminate()
        server.wait(30)
    done = workqueue(*shlex.split(refused)[1:])
    assert done.returncode == 2 and done.stderr.strip() == error.strip()
