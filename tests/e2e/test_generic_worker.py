"""fetch-run-put, the generic worker: a real object store over HTTP on loopback (GET and PUT),
file:// locations, and a user script run without a shell."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from .conftest import REPO

WORKER = REPO / "worker-images" / "generic" / "fetch-run-put"


class Store(BaseHTTPRequestHandler):
    objects: dict[str, bytes] = {}

    def do_GET(self):
        if self.path.startswith("/redirect/"):  # /redirect/PATH -> PATH on this server
            self.send_response(302)
            self.send_header("Location", self.path[len("/redirect") :])
            self.end_headers()
            return
        body = self.objects.get(unquote(self.path))
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", 0))
        if self.path.startswith("/readonly/"):
            self.rfile.read(length)
            self.send_response(403)
            self.end_headers()
            return
        self.objects[unquote(self.path)] = self.rfile.read(length)
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def store():
    Store.objects = {"/in/a b.txt": b"hello object\n", "/internal/secret": b"the secret\n"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", Store.objects
    server.shutdown()


@pytest.fixture
def upper(tmp_path):
    script = tmp_path / "upper"
    script.write_text(
        '#!/bin/sh\necho "input is $(basename "$INPUT_FILE")" >&2\n'
        'tr a-z A-Z < "$INPUT_FILE" > "$OUTPUT_FILE"\n'
    )
    script.chmod(0o755)
    return str(script)


def run(tmp_path, item):
    item_file = tmp_path / "item.json"
    item_file.write_text(json.dumps(item))
    return subprocess.run(
        [str(WORKER)],
        env=dict(os.environ, WORK_ITEM_FILE=str(item_file)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_fetch_run_put_over_http(tmp_path, store, upper):
    base, objects = store
    r = run(
        tmp_path,
        {"input": f"{base}/in/a%20b.txt", "script": [upper], "output": f"{base}/out/a.txt"},
    )
    assert r.returncode == 0, r.stderr
    assert objects["/out/a.txt"] == b"HELLO OBJECT\n"
    assert "input is a b.txt" in r.stderr


def test_file_locations_and_a_string_script(tmp_path, upper):
    (tmp_path / "in.txt").write_text("abc")
    out = tmp_path / "deep" / "out.txt"
    r = run(
        tmp_path,
        {"input": f"file://{tmp_path}/in.txt", "script": f"'{upper}'", "output": f"file://{out}"},
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "ABC"


def test_failures_are_one_line(tmp_path, store, upper):
    base, _ = store
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 4\n")
    failing.chmod(0o755)
    lazy = tmp_path / "lazy"
    lazy.write_text("#!/bin/sh\ntrue\n")
    lazy.chmod(0o755)
    cases = [
        ({"input": f"{base}/missing", "script": [upper], "output": f"{base}/o"}, 1, "download of"),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [str(failing)], "output": f"{base}/o"},
            1,
            "failed with exit code 4",
        ),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [str(lazy)], "output": f"{base}/o"},
            1,
            "wrote no OUTPUT_FILE",
        ),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [upper], "output": f"{base}/readonly/o"},
            1,
            "HTTP 403",
        ),
        ({"input": "ftp://x/y", "script": [upper], "output": f"{base}/o"}, 2, "unsupported"),
        ({"input": f"{base}/in/a%20b.txt", "output": f"{base}/o"}, 2, "no 'script'"),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [], "output": f"{base}/o"},
            2,
            "must be a command",
        ),
    ]
    for item, code, message in cases:
        r = run(tmp_path, item)
        assert r.returncode == code, (item, r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("fetch-run-put: ") and message in last, r.stderr


def run_with(tmp_path, item, *argv):
    """fetch-run-put in command-line mode: the item is the object, the command line the rest."""
    item_file = tmp_path / "item.json"
    item_file.write_text(json.dumps(item))
    return subprocess.run(
        [str(WORKER), *map(str, argv)], env=dict(os.environ, WORK_ITEM_FILE=str(item_file)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
NAMES = ["clip?a.mp4", "clip?b.mp4", "x#1.mp4", "x#2.mp4", "a%20b.mp4", "a b.mp4", "été 🎬.mp4"]


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_every_items_output_lands_apart_whatever_its_name_holds(tmp_path, store, upper, scheme):
    """?, #, %XX, spaces and unicode in a name are the name, not URL syntax: seven items,
    seven outputs, each holding its own item's result."""
    base, objects = store
    videos, out = tmp_path / "videos", tmp_path / "out"
    videos.mkdir()
    template = f"file://{out}/{{stem}}.txt" if scheme == "file" else f"{base}/out/{{stem}}.txt"
    for name in NAMES:
        (videos / name).write_text(f"content of {name}\n")
        item = {"name": name, "path": str(videos / name)}
        r = run_with(tmp_path, item, "--input-root", videos, "--output", template, upper)
        assert r.returncode == 0, (name, r.stderr)
    for name in NAMES:
        stem = name.rsplit(".", 1)[0]
        body = (out / f"{stem}.txt").read_bytes() if scheme == "file" else \
            objects[f"/out/{stem}.txt"]  # fmt: skip
        expected = f"content of {name}\n".encode().translate(UPPER)  # (tr a-z A-Z: ASCII)
        assert body == expected, name
    if scheme == "file":
        assert len(list(out.iterdir())) == len(NAMES)


@pytest.mark.parametrize(
    "item",
    [
        {"name": "x.mp4", "url": "file:///etc/shadow"},
        {"name": "x.mp4", "input": "file:///proc/self/environ"},
        {"name": "x.mp4", "path": "/etc/passwd"},
        {"name": "x.mp4", "path": "{videos}/../secret.txt"},
        {"name": "x.mp4", "path": "{videos}/link-out.mp4"},
    ],
    ids=["url", "input", "path", "dotdot", "symlink"],
)
def test_an_item_can_name_no_local_file_outside_the_input_roots(tmp_path, upper, item):
    videos = tmp_path / "videos"
    videos.mkdir()
    (tmp_path / "secret.txt").write_text("the secret")
    (videos / "link-out.mp4").symlink_to(tmp_path / "secret.txt")
    item = {k: v.replace("{videos}", str(videos)) for k, v in item.items()}
    out = tmp_path / "out"
    r = run_with(tmp_path, item, "--input-root", videos, "--output", f"file://{out}/{{stem}}",
                 upper)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "under no --input-root" in lines[0] or "must not have" in lines[0]
    assert not out.exists()  # nothing copied anywhere
    plain = run_with(tmp_path, item, "--output", f"file://{out}/{{stem}}", upper)
    assert plain.returncode == 2 and not out.exists()  # no --input-root: no local file at all


def test_a_stream_records_fields_are_a_request(tmp_path, store, upper):
    """A Redis stream record (`XADD jobs * job j1 input … script … output …`) as the
    ambassador serves it (`log_records.describe`): its fields are the request."""
    from kube_workqueue.ambassador.sources.log_records import LogShape, describe

    base, objects = store
    fields = {"job": "j1", "input": f"{base}/in/a%20b.txt", "script": upper,
              "output": f"{base}/out/j1.txt"}  # fmt: skip
    name, meta = LogShape("job").change("1733250000000-0", fields)
    r = run(tmp_path, describe(name, meta, "jobs"))
    assert r.returncode == 0, r.stderr
    assert objects["/out/j1.txt"] == b"HELLO OBJECT\n"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [({"body": "render me"}, b"RENDER ME"), ({"body.base64": "aGk="}, b"HI"),
     ({"width": "320"}, b'"WIDTH": "320"')],
    ids=["text", "bytes", "fields"],
)  # fmt: skip
def test_a_log_record_that_names_no_object_is_its_own_input(tmp_path, upper, fields, expected):
    """A record (a NATS message, a Redis stream entry) served by the log core: its payload -
    the body as sent, else its fields as JSON - is INPUT_FILE, named after the item."""
    from kube_workqueue.ambassador.sources.log_records import LogShape, describe

    name, meta = LogShape(None).change("000000000007", fields)
    out = tmp_path / "out"
    r = run_with(tmp_path, describe(name, meta, "RENDERS"), "--output", f"file://{out}/{{name}}",
                 upper)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert expected in (out / "000000000007").read_bytes()
    assert "input is 000000000007" in r.stderr
    assert "record RENDERS 000000000007 ->" in r.stdout


def test_an_item_can_name_no_http_object_outside_the_input_urls(tmp_path, store, upper):
    """The network twin of the input roots: in command-line mode an http(s) input must lie
    under an --input-url prefix (scheme, host, port, and a path cut at a /), a redirect is
    held to the same rule, and nothing is copied out of an internal service."""
    base, objects = store
    out = tmp_path / "out"
    template = f"file://{out}/{{stem}}.txt"
    allowed = ("--input-url", f"{base}/in/")
    ok = run_with(tmp_path, {"name": "a.txt", "url": f"{base}/in/a%20b.txt"}, *allowed,
                  "--output", template, upper)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert (out / "a.txt").read_text() == "HELLO OBJECT\n"
    refused = {
        "none given": ({"url": f"{base}/internal/secret"}, ()),
        "outside": ({"url": f"{base}/internal/secret"}, allowed),
        "a dot segment": ({"url": f"{base}/in/../internal/secret"}, allowed),
        "an encoded one": ({"url": f"{base}/in/%2e%2e/internal/secret"}, allowed),
        "another host": ({"url": base.replace("127.0.0.1", "localhost") + "/in/x"}, allowed),
        "a longer path": ({"input": f"{base}/inbox/x"}, ("--input-url", f"{base}/in")),
        "redirected out": ({"url": f"{base}/in/../redirect/internal/secret"}, allowed),
        # what the check and the fetch could read apart: refused, never guessed at
        "a user part": ({"url": base.replace("//", "//evil@") + "/in/a%20b.txt"}, allowed),
        "a tab": ({"url": f"{base}/in/a\tb.txt"}, allowed),
        "a newline": ({"url": f"{base}/in/a\nb.txt"}, allowed),
        "a NUL": ({"url": f"{base}/in/a\x00b.txt"}, allowed),
        "a backslash host": (
            {"url": base.replace("127.0.0.1", "127.0.0.1\\@x") + "/in/"},
            allowed,
        ),  # fmt: skip
    }
    for why, (item, options) in refused.items():
        r = run_with(tmp_path, {"name": "s.txt", **item}, *options, "--output", template, upper)
        assert r.returncode == 2, (why, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (why, r.stderr)
    assert not (out / "s.txt").exists()
    # a redirect from an allowed prefix to one that is not: the download is refused
    objects_before = dict(objects)
    moved = run_with(tmp_path, {"name": "m.txt", "url": f"{base}/redirect/internal/secret"},
                     "--input-url", f"{base}/redirect/", "--output", template, upper)  # fmt: skip
    assert moved.returncode != 0 and "redirected where it may not go" in moved.stderr
    assert not (out / "m.txt").exists() and objects == objects_before


def test_link_local_addresses_are_never_fetched_from(tmp_path, upper):
    """Instance metadata lives at 169.254.169.254 (and fe80::): never fetched from, whatever
    the mode and the prefixes given."""
    metadata = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
    request = run(tmp_path, {"input": metadata, "script": [upper],
                             "output": f"file://{tmp_path}/o"})  # fmt: skip
    assert request.returncode == 2 and "link-local" in request.stderr, request.stderr
    as_object = run_with(tmp_path, {"name": "x", "url": metadata},
                         "--input-url", "http://169.254.169.254/", "--output",
                         f"file://{tmp_path}/{{stem}}", upper)  # fmt: skip
    assert as_object.returncode == 2 and "link-local" in as_object.stderr


def test_the_command_line_is_checked_whole_and_said_in_one_line(tmp_path, store, upper):
    base, _ = store
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "a.txt").write_text("abc")
    item = {"name": "a.txt", "path": str(videos / "a.txt")}
    shown = run_with(tmp_path, item, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: fetch-run-put")
    for argv, words in [
        (("--output", f"file://{tmp_path}/{{nope}}", upper), "{nope} is no placeholder"),
        (("--output", f"file://{tmp_path}/x"), "goes with the script"),
        ((upper,), "goes with --output"),
        (("--input-url", "ftp://x/", "--output", "file:///x", upper), "http(s)://"),
        (("--bogus",), "unrecognized arguments"),
    ]:
        r = run_with(tmp_path, item, *argv)
        assert r.returncode == 2, (argv, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (argv, r.stderr)
    # the options in any order; a script named from here runs from its temporary folder
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "up").write_text(Path(upper).read_text())
    (scripts / "up").chmod(0o755)
    out = tmp_path / "out"
    r = subprocess.run(
        [str(WORKER), "--output", f"file://{out}/{{stem}}.up", "--input-root", str(videos),
         "scripts/up"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env=dict(os.environ, WORK_ITEM_FILE=str(tmp_path / "item.json")),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (out / "a.up").read_text() == "ABC"


def test_an_item_can_name_no_object_of_a_store_outside_the_input_urls(tmp_path, s3, upper):
    """A stream record or a Redis member can say `bucket=secret-bucket key=creds.json`: in
    command-line mode an s3://, gs:// or azblob:// input is fetched only under an --input-url
    prefix or the queue's own source (`WORKQUEUE_SOURCE_OBJECTS`, which `workqueue run` gives
    its workers) - refused with one line and exit 2 before any request otherwise (moto's S3
    here; the other stores' endpoints point at nothing, so only a refusal can answer)."""
    from kube_workqueue.ambassador.sources.log_records import LogShape, describe

    secret = s3.bucket("creds.json", body=b"the keys")
    media = s3.bucket("in/a.txt", "inbox/b.txt", body=b"hello")
    out = tmp_path / "out"
    template = f"file://{out}/{{stem}}.up"
    env = {**s3.env, "AWS_EC2_METADATA_DISABLED": "true",
           "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9",
           "AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/acct"}  # fmt: skip

    def record(**fields):
        name, meta = LogShape(None).change("1733250000000-0", fields)
        return describe(name, meta, "jobs")

    def fetched(item, *argv, **more):
        item_file = tmp_path / "item.json"
        item_file.write_text(json.dumps(item))
        return subprocess.run(
            [str(WORKER), *argv, "--output", template, upper],
            env={**os.environ, **env, **more, "WORK_ITEM_FILE": str(item_file)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    allowed = ("--input-url", f"s3://{media}/in/")
    stolen = record(bucket=secret, key="creds.json")
    for why, item, argv, more in (
        ("no prefix", stolen, (), {}),
        ("another bucket", stolen, allowed, {}),
        ("beside the source", stolen, (), {"WORKQUEUE_SOURCE_OBJECTS": f"s3://{media}/in/"}),
        ("a longer prefix", record(bucket=media, key="inbox/b.txt"), allowed, {}),
        ("a url field", record(url=f"s3://{secret}/creds.json"), allowed, {}),
        ("Cloud Storage", record(url="gs://secret/creds.json"), ("--input-url", "gs://media/"), {}),
        (
            "Azure",
            record(url="azblob://acct/secret/creds.json"),
            ("--input-url", "azblob://acct/media/"),
            {},
        ),  # fmt: skip
        ("a newline in a key", record(bucket=media, key="in/a\n.txt"), allowed, {}),
    ):
        r = fetched(item, *argv, **more)
        assert r.returncode == 2, (why, r.stderr)
        said = r.stderr.strip().splitlines()
        assert len(said) == 1 and said[0].startswith("fetch-run-put: "), (why, r.stderr)
        assert "failed" not in said[0], (why, said)  # refused, never tried
    assert not out.exists()
    for why, argv, more in (("an --input-url", allowed, {}),
                            ("the queue's own source", (),
                             {"WORKQUEUE_SOURCE_OBJECTS": f"s3://{media}/in/"})):  # fmt: skip
        r = fetched(record(bucket=media, key="in/a.txt"), *argv, **more)
        assert r.returncode == 0, (why, r.stderr)
        assert (out / "1733250000000-0.up").read_bytes() == b"HELLO"
        (out / "1733250000000-0.up").unlink()
