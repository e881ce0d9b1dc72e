"""What counts as an item."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador.naming import is_candidate_file_name, normalise_suffixes

MP4 = (".mp4",)


@pytest.mark.parametrize(
    "name", ["a.mp4", "A.MP4", "clip.final.Mp4", "spaces and 'quotes'.mp4", "ünïcødé.mp4"]
)
def test_items(name):
    assert is_candidate_file_name(name, MP4)


@pytest.mark.parametrize(
    "name",
    [
        ".hidden.mp4",
        "a.mp4.part",
        "a.mp4.tmp",
        "a.mp4.crdownload",
        "a.mp4~",
        "a.mkv",
        "mp4",
        "a.mp4.PART",
        "a\udcff.mp4",
    ],
)
def test_not_items(name):
    assert not is_candidate_file_name(name, MP4)


def test_suffixes_are_normalised():
    assert normalise_suffixes(["MP4", ".mov", ".mp4"]) == (".mp4", ".mov")
    with pytest.raises(ValueError):
        normalise_suffixes([""])
    with pytest.raises(ValueError):
        normalise_suffixes(["a/b"])
