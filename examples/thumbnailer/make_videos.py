#!/usr/bin/env python3
"""Make N short sample videos with ffmpeg: varied lengths (1-4 s) and colours, each opening with
a fade from black (so a thumbnailer that takes the first frame is caught out).

    python examples/thumbnailer/make_videos.py OUT_DIR [--count 8] [--seconds 1-4] [--corrupt]

ffmpeg is taken from PATH, else from the imageio-ffmpeg package. --corrupt adds one file named
broken.mp4 that is not a video.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys


def ffmpeg_exe() -> str:
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError:
        sys.exit("make_videos: no ffmpeg on PATH and imageio-ffmpeg is not installed")
    return imageio_ffmpeg.get_ffmpeg_exe()


def make_video(ffmpeg: str, path: str, seconds: float, hue: int, size: str = "320x240") -> None:
    source = f"testsrc2=size={size}:rate=25:duration={seconds:g}"
    filters = f"hue=h={hue}:s=1.5,fade=t=in:st=0:d=0.4"
    subprocess.run(
        [
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            source,
            "-vf",
            filters,
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            path,
        ],
        check=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--seconds", default="1-4", help="a length or a range, e.g. 1 or 1-4")
    parser.add_argument("--corrupt", action="store_true", help="add one broken.mp4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    low, _, high = args.seconds.partition("-")
    low_s, high_s = float(low), float(high or low)
    rng = random.Random(args.seed)
    ffmpeg = ffmpeg_exe()
    os.makedirs(args.out_dir, exist_ok=True)
    for i in range(args.count):
        seconds = round(rng.uniform(low_s, high_s), 1)
        make_video(
            ffmpeg, os.path.join(args.out_dir, f"sample-{i:03d}.mp4"), seconds, hue=(i * 47) % 360
        )
    if args.corrupt:
        with open(os.path.join(args.out_dir, "broken.mp4"), "wb") as f:
            f.write(b"this is not a video\n" * 100)
    print(
        f"made {args.count} video(s){' and broken.mp4' if args.corrupt else ''} in {args.out_dir}"
    )


if __name__ == "__main__":
    main()
