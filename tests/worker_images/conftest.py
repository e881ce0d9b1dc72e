"""The worker images' tests run the real scripts on real videos (the e2e fixtures)."""

from tests.e2e.conftest import ffmpeg_env, sample_videos  # noqa: F401  (fixtures)
