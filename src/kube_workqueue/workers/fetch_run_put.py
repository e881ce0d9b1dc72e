#!/usr/bin/env python3
"""fetch-run-put: the generic worker of Burns' work-queue pattern - download an object, run a
user script on it, upload the result. Either everything comes from the item's data
($WORK_ITEM_FILE), a request:

    {"input":  "s3://bucket/in/a.mp4", "https://store.example/in/a.mp4" or "file:///in/a.mp4",
     "script": ["/scripts/transcode", "--fast"]   (an argument list; a string is split like a
                                                    shell would split it, never run by one),
     "output": "s3://bucket/out/a.webm", "https://store.example/out/a.webm" or "file:///..."}

or the item is the object itself - what the ambassador's object-store sources serve
({"bucket", "key", "url": "s3://...", "gs://..." or "azblob://..."}; a folder's {"path"} too;
a log's record, whose payload - `body`, or its fields as JSON - is the input itself) - and the
command line says the rest:

    fetch-run-put [--input-root DIR]... [--input-url PREFIX]... \
        --output 's3://bucket/thumbs/{stem}.png' /scripts/thumbnail [ARGS...]

`{name}` in --output is the item's name, `{stem}` its last part without the suffix - put into the
URL as the name it is: percent-encoded in an http(s):// or file:// template (`clip?a`, `x#1`,
`a%20b` and `a b` are four outputs, never one), as written in an s3:// key; any other `{...}`
is refused at once. In this mode the item is data, not a request: it may name a local file (a
folder's `path`, a `file://` url or input) only under a folder an `--input-root` names, an
http(s) object only under a prefix an `--input-url` names, and an object of a store (`s3://`,
`gs://`, `azblob://`) only under an `--input-url` prefix of its store or the queue's own
source's (`WORKQUEUE_SOURCE_OBJECTS`) - an item can never have another local file
(`/etc/shadow`, `/proc/self/environ`), an internal service's answer or another bucket's object
copied to the output; one line, exit 2, before any request (`input_rules.py`, whose one parser
the fetch reads too: a user part or a control character in an item's URL is refused). In
either mode no link-local address (instance metadata) is fetched from or put to, redirects
included; a request item is held to the roots
and prefixes too when they are given. Options come in any order, before the script. s3:// goes
through boto3 with its standard configuration (credentials chain, AWS_PROFILE, web identity /
IRSA, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for MinIO, Ceph, R2); an object key is a name,
never a path: a key with `../` is fetched and put as that key (a file:// output refuses it).

The script runs in a private temporary folder with INPUT_FILE (the downloaded object, under its
own base name made safe - `safe_base_name`: whatever the URL or key says, nothing is written
outside that folder), OUTPUT_FILE (where it must write the result) and WORK_ITEM_FILE in its
environment; a script named by a relative path (`scripts/x`) is found from where
fetch-run-put was started. http(s) objects are fetched with GET and stored with PUT; file:// ones
are read and written in place (the result renamed into place, so a half-written result is never
seen).
Exit 0 on success; 1 with one line on stderr when a download, the script or the upload fails;
2 when the item data is not a valid request. The standard library only - and each object store's
official client for its scheme (cloud_objects.py): boto3 for s3://, google-cloud-storage for
gs:// (Application Default Credentials, STORAGE_EMULATOR_HOST), azure-storage-blob for
azblob://ACCOUNT/CONTAINER/KEY (AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY or
AZURE_STORAGE_SAS_TOKEN).
"""

import argparse
import base64
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unicodedata
import urllib.error
import urllib.parse
import urllib.request

try:
    from . import cloud_objects, input_rules
    from .transfers import fail, fetch, put, scheme_of, shown
except ImportError:  # run as a script: the sibling modules
    import cloud_objects  # type: ignore[no-redef]
    import input_rules  # type: ignore[no-redef]
    from transfers import fail, fetch, put, scheme_of, shown  # type: ignore[no-redef]

MAX_NAME_BYTES = 200  # a file name may have 255 bytes on every common file system: room to spare


def safe_base_name(text: str, fallback: str) -> str:
    """A file name made from what an item says (a URL's last segment, an object key, an item's
    name), safe to join to a folder whatever it says: the part after its last / or \\, without
    NUL or any other control or format character, without leading dots (never . or .., never
    hidden), at most MAX_NAME_BYTES bytes (its extension kept); `fallback` when nothing is
    left. Percent-decoding is the caller's, before this. Every worker image has this rule,
    word for word (tests/worker_images/test_safe_names.py holds them to it)."""
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = name.strip().lstrip(".")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        stem, ext = os.path.splitext(name)
        ext = ext if len(ext.encode()) <= 16 else ""
        room = MAX_NAME_BYTES - len(ext.encode())
        stem = stem.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
        name = stem + ext
    return name or fallback


def read_item() -> dict:
    item_file = os.environ.get("WORK_ITEM_FILE")
    if not item_file:
        fail("WORK_ITEM_FILE is not set", 2)
    try:
        with open(item_file, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the work item {item_file}: {exc}", 2)
    if not isinstance(data, dict):
        fail("the work item is not a JSON object", 2)
    return data


PLACEHOLDERS = ("{name}", "{stem}")


class Usage(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints two)
        fail(f"{message} (see fetch-run-put --help)", 2)


def parser() -> argparse.ArgumentParser:
    p = Usage(
        prog="fetch-run-put",
        usage="fetch-run-put [--input-root DIR]... [--input-url PREFIX]... "
        "[--output TEMPLATE SCRIPT [ARGS...]]",
        description="The generic worker: fetch the item's object, run SCRIPT on it (INPUT_FILE "
        "and OUTPUT_FILE in its environment, no shell), put the result. Without --output the "
        "item is a request: {input, script, output} in $WORK_ITEM_FILE. With it, the item is "
        "the object, and may name only what --input-root and --input-url allow.",
    )
    p.add_argument(
        "--input-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose files an item may name (repeatable)",
    )
    p.add_argument(
        "--input-url",
        action="append",
        default=[],
        metavar="PREFIX",
        help="a prefix whose objects an item may name: http(s)://HOST/PATH, s3://BUCKET/PREFIX, "
        "gs://BUCKET/PREFIX or azblob://ACCOUNT/CONTAINER/PREFIX (repeatable; the queue's own "
        "object-store source, $WORKQUEUE_SOURCE_OBJECTS, is allowed without one)",
    )
    p.add_argument(
        "--output",
        metavar="TEMPLATE",
        help="where the result goes: s3://, gs://, azblob://, http(s):// or file:// with "
        "{name} or {stem} (the item's name, its last part without the suffix)",
    )
    p.add_argument(
        "script",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS...]",
        help="the program to run on the fetched object",
    )
    return p


def command_line(argv: list[str]) -> argparse.Namespace:
    """The checked command line: roots as real paths, prefixes checked, the template's
    placeholders known, a script given with --output (and none without)."""
    args = parser().parse_args(argv)
    roots = []
    for root in args.input_root:
        if not os.path.isdir(root):
            fail(f"--input-root {root} is not a folder", 2)
        roots.append(os.path.realpath(root))
    args.input_root = roots
    try:
        args.input_url = [input_rules.prefix(text) for text in args.input_url]
    except ValueError as exc:
        fail(str(exc), 2)
    if args.output is None and args.script:
        fail("a script on the command line goes with --output TEMPLATE (see --help)", 2)
    if args.output is not None:
        if not args.script:
            fail("--output goes with the script to run (see --help)", 2)
        unknown = [p for p in re.findall(r"\{[^{}]*\}", args.output) if p not in PLACEHOLDERS]
        if unknown:
            fail(f"--output {args.output}: {unknown[0]} is no placeholder (use {{name}} or "
                 "{stem})", 2)  # fmt: skip
    return args


def allowed_input(url: str, args: argparse.Namespace, *, as_object: bool) -> None:
    """One line and exit 2 unless the item may make this worker read `url` (`input_rules`):
    as the object (command-line mode), or as a request held to the roots and prefixes given.
    Whatever the mode, a URL the check and the fetch could read differently is refused."""
    try:
        found = input_rules.location(url)
        if found.scheme in cloud_objects.SCHEMES:
            cloud_objects.parts(url)  # (a key, too: an input is an object, not a prefix)
    except (ValueError, cloud_objects.Refused) as exc:
        fail(str(exc), 2)
    restricted = as_object or args.input_root or args.input_url
    if not restricted:
        return
    if found.scheme == "file":
        refused = input_rules.under_roots(url, args.input_root)
    elif found.scheme in cloud_objects.SCHEMES:
        refused = input_rules.under_prefixes(url, args.input_url + input_rules.source_objects())
    else:
        refused = input_rules.under_prefixes(url, args.input_url)
    if refused:
        fail(refused, 2)


def in_template(value: str, template: str) -> str:
    """`value` as it goes into `template`: percent-encoded in an http(s):// or file:// URL
    (its `/` kept: a recursive name's folders), as written in an s3:// key."""
    if template.lower().startswith(tuple(f"{s}://" for s in cloud_objects.SCHEMES)):
        return value
    return urllib.parse.quote(value, safe="/")


def request_of(data: dict, args: argparse.Namespace) -> dict:
    """input, script and output: from the item (a request), or from the item as the object
    and the command line (`--output TEMPLATE SCRIPT ARGS...`); what it names checked."""
    if args.output is None:
        for key in ("input", "script", "output"):
            if key not in data:
                fail(f"the work item has no {key!r} (or give --output and a script)", 2)
        if isinstance(data["input"], str):
            allowed_input(data["input"], args, as_object=False)
        return data
    template, script = args.output, args.script
    if "bucket" in data and "key" in data:
        url = data.get("url")  # a Cloud Storage or Azure object's own scheme; S3's if none
        scheme = url.split("://", 1)[0].lower() if isinstance(url, str) and "://" in url else ""
        if scheme not in cloud_objects.SCHEMES:
            url = f"s3://{data['bucket']}/{data['key']}"
        source = {
            "input": url,
            "bucket": data["bucket"],
            "key": data["key"],
        }
    elif isinstance(data.get("url"), str) or isinstance(data.get("input"), str):
        source = {"input": data.get("input") or data["url"]}
    elif isinstance(data.get("path"), str):
        source = {"input": "file://" + urllib.parse.quote(os.path.abspath(data["path"]))}
    elif "position" in data and "log" in data:  # a log's record: its data is the input
        source = {
            "input": f"record {data['log']} {data['position']}",
            "inline": record_of(data),
            "name": data.get("name"),
        }
    else:
        fail("the work item names no object: no bucket and key, url, input or path", 2)
    if "inline" not in source:
        allowed_input(source["input"], args, as_object=True)
    name = data.get("name") if isinstance(data.get("name"), str) else data.get("key", "item")
    stem = os.path.splitext(name.rsplit("/", 1)[-1])[0] or "item"
    output = template.replace("{name}", in_template(name, template))
    output = output.replace("{stem}", in_template(stem, template))
    return {**source, "script": script, "output": output}


def record_of(data: dict) -> bytes:
    """A log record's bytes, as INPUT_FILE: a message's payload as sent (`body`, or
    `body.base64` decoded), else the item's data as JSON (its fields, position, log)."""
    if isinstance(data.get("body.base64"), str):
        try:
            return base64.b64decode(data["body.base64"], validate=True)
        except ValueError:
            fail("the record's body.base64 is not base64", 2)
    if isinstance(data.get("body"), str):
        return data["body"].encode("utf-8")
    return json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"


def redirect_refused(url: str, args: argparse.Namespace, as_object: bool) -> str | None:
    """Why a download may not follow a redirect to `url` (the rules of its first URL)."""
    refused = input_rules.link_local(url)
    if refused or not (as_object or args.input_root or args.input_url):
        return refused
    if url.lower().startswith(("http://", "https://")):
        return input_rules.under_prefixes(url, args.input_url)
    return f"a redirect to {url}"


def output_location(url: str) -> None:
    """One line and exit 2 for an output that holds a control character (a tab, a newline,
    NUL: what one parser drops and another keeps)."""
    if input_rules.CONTROL.search(url):
        fail(f"a location must not hold a control character (a tab, a newline, NUL): {url!r}", 2)


def main() -> None:
    args = command_line(sys.argv[1:])
    data = request_of(read_item(), args)
    script = data["script"]
    argv = shlex.split(script) if isinstance(script, str) else script
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) for w in argv):
        fail("'script' must be a command: a non-empty list of strings, or a string", 2)
    program = argv[0]  # as typed: what the messages name
    if os.sep in argv[0] and not os.path.isabs(argv[0]):  # found from here, not from the
        argv = [os.path.abspath(argv[0]), *argv[1:]]  # temporary folder it runs in
    inline = data.get("inline")  # a log record's bytes (`request_of`): nothing to fetch
    for key in ("input", "output"):
        if not isinstance(data[key], str):
            fail(f"{key!r} must be a URL string", 2)
        if key == "output" or inline is None:
            scheme_of(data[key])
    output_location(data["output"])
    with tempfile.TemporaryDirectory(prefix="fetch-run-put-") as work:
        where = data["input"].rstrip("/")  # an object's key is a name, taken as written
        if inline is not None:
            where = str(data.get("name") or "record")
        elif scheme_of(data["input"]) not in cloud_objects.SCHEMES:  # decoded first: %2F is a
            # slash like any other (an object's key is a name, taken as written)
            where = urllib.parse.unquote(urllib.parse.urlsplit(data["input"]).path)
        input_file = os.path.join(work, safe_base_name(where, "input"))
        output_file = os.path.join(work, "output")
        if inline is not None:
            with open(input_file, "wb") as f:
                f.write(inline)
        else:
            as_object = args.output is not None
            fetch(data["input"], input_file,
                  lambda url: redirect_refused(url, args, as_object))  # fmt: skip
        env = dict(os.environ, INPUT_FILE=input_file, OUTPUT_FILE=output_file)
        try:
            code = subprocess.run(argv, env=env, cwd=work, stdin=subprocess.DEVNULL).returncode
        except OSError as exc:
            fail(f"cannot run the script {program}: {exc.strerror}")
        if code != 0:
            fail(f"the script {program} failed with exit code {code}")
        if not os.path.isfile(output_file):
            fail(f"the script {program} wrote no OUTPUT_FILE")
        put(output_file, data["output"])
    print(shown(f"fetch-run-put: {data['input']} -> {data['output']}"))


if __name__ == "__main__":
    main()
