#!/usr/bin/env python3
"""thumbnail: the video-thumbnailer worker (Burns' example worker), one video per run.

Contract: reads the item's data (JSON) from the file named by $WORK_ITEM_FILE, takes the video's
path from data["path"], and writes $OUTPUT_DIR/<stem>.png (keeping the item's sub-folder when its
name has one). Exit 0 on success; non-zero with one line on stderr saying what went wrong (a
corrupt video, a missing file, no OUTPUT_DIR). ffmpeg comes from $FFMPEG, else PATH, else the
imageio-ffmpeg wheel when this Python has it (else one line saying how to get one, exit 127).
The item never reaches a shell: ffmpeg is run with an argument list.

Run by the generic fetch-run-put (a video in an object store): INPUT_FILE is the downloaded
video and OUTPUT_FILE where the PNG goes; the item's `path` and OUTPUT_DIR are then not needed.

A representative frame, not the first: it looks a third of the way in (past fade-ins and black
leaders) and lets ffmpeg's `thumbnail` filter pick, among the next frames, the one closest to
their average - which is never a black frame in a clip that is mostly picture.
Settings: THUMB_WIDTH (default 320), THUMB_FRAMES (frames to choose from, default 50).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata


def fail(message: str, code: int = 1) -> None:
    print(f"thumbnail: {message}", file=sys.stderr)
    sys.exit(code)


def ffmpeg() -> str:
    """The ffmpeg to run: $FFMPEG, else the one on PATH, else the binary the imageio-ffmpeg
    wheel ships (when this Python has it); else one line saying how to get one, exit 127."""
    named = os.environ.get("FFMPEG")
    if named:
        found = shutil.which(named)  # a path, or a name on PATH
        if found is None:
            fail(f"FFMPEG={named} is not an executable file (unset it to use the one on PATH)",
                 127)  # fmt: skip
        return found
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # not installed, or its binary missing
        fail(
            "ffmpeg not found: install it (e.g. apt-get install ffmpeg), or "
            "pip install imageio-ffmpeg into the Python that runs this worker, "
            "or set FFMPEG to its path",
            127,
        )


USAGE = """usage: workqueue-thumbnail   (no arguments: the item comes from $WORK_ITEM_FILE)

The video-thumbnailer worker: a PNG of a representative frame of the video the item names.
  WORK_ITEM_FILE   the item's data (JSON) with its "path" (the video)
  OUTPUT_DIR       where <stem>.png goes (the item's sub-folders kept)
  INPUT_FILE, OUTPUT_FILE   instead of both, when fetch-run-put runs it
  FFMPEG           the ffmpeg to run (else PATH's, else imageio-ffmpeg's)
  THUMB_WIDTH      the thumbnail's width in pixels (default 320, 16 to 7680)
  THUMB_FRAMES     frames to choose the most typical among (default 50, 1 to 1000)
Exit 0 on success; 1 with one line when the video is unusable; 2 when it is misconfigured."""


def setting(name: str, default: int, least: int, most: int) -> int:
    """A whole-number setting from the environment; one line and exit 2 when it is not one."""
    text = os.environ.get(name, "").strip() or str(default)
    if not text.isdigit() or not least <= int(text) <= most:
        fail(f"{name}={text!r}: give a whole number from {least} to {most}", 2)
    return int(text)


def read_item() -> dict:
    item_file = os.environ.get("WORK_ITEM_FILE")
    if not item_file:
        fail("WORK_ITEM_FILE is not set", 2)
    try:
        with open(item_file, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the work item {item_file}: {exc}", 2)
    if not isinstance(data, dict) or not isinstance(data.get("path"), str):
        fail(f"the work item {item_file} has no 'path'", 2)
    return data


def run_ffmpeg(argv: list[str]) -> subprocess.CompletedProcess:
    """ffmpeg run to its end; one line (exit 127) when it cannot be started at all."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        fail(f"cannot run ffmpeg {argv[0]}: {exc.strerror or exc}", 127)


def duration_seconds(path: str) -> float | None:
    """The container's duration from ffmpeg's own report; None when it does not say."""
    probe = run_ffmpeg([ffmpeg(), "-hide_banner", "-nostdin", "-i", path])
    if "Video:" not in probe.stderr:
        last = [ln for ln in probe.stderr.strip().splitlines() if ln.strip()]
        fail(f"not a readable video: {path}: {last[-1].strip() if last else 'no video stream'}")
    match = re.search(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)", probe.stderr)
    if not match:
        return None
    h, m, s = match.groups()
    return int(h) * 3600 + int(m) * 60 + float(s)


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


def made(out_dir: str) -> None:
    """OUTPUT_DIR, made when it is missing and its parent is there - never more: a mistyped
    `/nonexistent/dir` (as root, which may write anywhere) made `/nonexistent`. One line and
    exit 2 otherwise."""
    if os.path.isdir(out_dir):
        return
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        fail(f"OUTPUT_DIR {out_dir}: no such folder, and no {parent} to make it in (the "
             "thumbnailer makes only the last folder)", 2)  # fmt: skip
    try:
        os.mkdir(out_dir)
    except FileExistsError:  # another worker made it meanwhile
        pass
    except OSError as exc:
        fail(f"cannot make OUTPUT_DIR {out_dir}: {exc.strerror}", 2)


def output_path(data: dict, out_dir: str) -> str:
    """OUTPUT_DIR/<sub-folders of the item's name>/<stem>.png, each part made safe: whatever
    the name says, the thumbnail lands inside OUTPUT_DIR (checked after symlinks too)."""
    name = data.get("name") if isinstance(data.get("name"), str) else os.path.basename(data["path"])
    parts = [safe_base_name(p, "") for p in name.replace("\\", "/").split("/")]
    parts = [p for p in parts if p]
    stem = os.path.splitext(parts[-1] if parts else "thumbnail")[0] or "thumbnail"
    target = os.path.join(out_dir, *parts[:-1], safe_base_name(stem + ".png", "thumbnail.png"))
    root = os.path.realpath(out_dir)
    if not os.path.realpath(target).startswith(root + os.sep):
        fail(f"the item's name would put the thumbnail outside OUTPUT_DIR: {name!r}", 2)
    return target


def main() -> None:
    if sys.argv[1:] in (["--help"], ["-h"]):
        print(USAGE)
        return
    if sys.argv[1:]:
        fail(f"takes no arguments (got {' '.join(sys.argv[1:])!r}): see --help", 2)
    width = setting("THUMB_WIDTH", 320, 16, 7680)
    frames = setting("THUMB_FRAMES", 50, 1, 1000)
    ffmpeg()  # a misconfigured one is said before anything else
    fetched, wanted = os.environ.get("INPUT_FILE"), os.environ.get("OUTPUT_FILE")
    if fetched and wanted:  # run by fetch-run-put: the video was fetched, the PNG is put back
        video, target = fetched, wanted
    else:
        data = read_item()
        out_dir = os.environ.get("OUTPUT_DIR")
        if not out_dir:
            fail("OUTPUT_DIR is not set", 2)
        made(out_dir)
        video, target = data["path"], output_path(data, out_dir)
    if not os.path.isfile(video):
        fail(f"video not found: {video}")
    duration = duration_seconds(video)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".thumb-", suffix=".png", dir=os.path.dirname(target) or ".")
    os.close(fd)
    seek = ["-ss", f"{duration / 3:.3f}"] if duration and duration > 0.5 else []
    cmd = [
        ffmpeg(),
        "-hide_banner",
        "-nostdin",
        "-loglevel",
        "error",
        "-y",
        *seek,
        "-i",
        video,
        "-vf",
        f"thumbnail={frames},scale={width}:-2",
        "-frames:v",
        "1",
        "-update",
        "1",
        tmp,
    ]
    try:
        run = run_ffmpeg(cmd)
        if run.returncode != 0 or os.path.getsize(tmp) == 0:
            last = [ln for ln in run.stderr.strip().splitlines() if ln.strip()]
            fail(
                f"ffmpeg could not make a thumbnail of {video}: "
                f"{last[-1].strip() if last else 'no frame decoded'}"
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private; a thumbnail is for sharing
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"thumbnail: {video} -> {target}")


if __name__ == "__main__":
    main()
