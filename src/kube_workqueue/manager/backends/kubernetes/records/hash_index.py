"""A map of 64-bit keys to 64-bit values that holds a million entries in about 20 bytes each.

The record of batches answers "which batch holds this item?" for every item the source lists,
on every poll: a Python dict of a million int keys costs about 100 bytes an entry. Here most
entries live in two sorted `array('Q')`s (16 bytes an entry), found by binary search; the
entries written since the last merge live in a small dict, which is merged into the arrays
once it holds an eighth as many entries as they do (so each write costs a constant number of
steps, amortized). A deletion is a `None` in the dict until the merge drops the key.

Invariant: `_keys` is sorted and unique, `_values[i]` belongs to `_keys[i]`; an entry of
`_recent` overrides the arrays' entry for its key (`None`: deleted).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator

MIN_RECENT = 4096  # below this many recent entries, never merge


class HashIndex:
    def __init__(self) -> None:
        self._keys = array("Q")
        self._values = array("Q")
        self._recent: dict[int, int | None] = {}
        self._size = 0

    def get(self, key: int) -> int | None:
        if key in self._recent:
            return self._recent[key]
        keys = self._keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return self._values[i]
        return None

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def set(self, key: int, value: int) -> None:
        if self.get(key) is None:
            self._size += 1
        self._recent[key] = value
        self._merge_if_due()

    def delete(self, key: int) -> None:
        if self.get(key) is not None:
            self._size -= 1
            self._recent[key] = None
            self._merge_if_due()

    def __len__(self) -> int:
        return self._size

    def items(self) -> Iterator[tuple[int, int]]:
        """Every (key, value), in no particular order."""
        recent = self._recent
        for key, value in zip(self._keys, self._values, strict=True):
            if key not in recent:
                yield key, value
        for key, value in list(recent.items()):
            if value is not None:
                yield key, value

    @classmethod
    def built(cls, keys: array, values: array) -> HashIndex:
        """An index of `keys[i] -> values[i]` made in one sort (a start's load: a million
        entries set one by one merge twenty times); where a key repeats, its last value wins."""
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: repeats keep order
        index = cls()
        sorted_keys, sorted_values = index._keys, index._values
        for position, i in enumerate(order):
            key = keys[i]
            if position + 1 < len(order) and keys[order[position + 1]] == key:
                continue  # a later entry of the same key follows: it wins
            sorted_keys.append(key)
            sorted_values.append(values[i])
        index._size = len(sorted_keys)
        return index

    def _merge_if_due(self) -> None:
        if len(self._recent) > max(MIN_RECENT, len(self._keys) // 8):
            self.merge()

    def merge(self) -> None:
        """Fold the recent entries into the sorted arrays."""
        recent = sorted(self._recent.items())
        keys, values = array("Q"), array("Q")
        old_keys, old_values = self._keys, self._values
        i, n = 0, len(old_keys)
        for key, value in recent:
            while i < n and old_keys[i] < key:
                keys.append(old_keys[i])
                values.append(old_values[i])
                i += 1
            if i < n and old_keys[i] == key:
                i += 1  # overridden (or deleted) by the recent entry
            if value is not None:
                keys.append(key)
                values.append(value)
        keys.extend(old_keys[i:])
        values.extend(old_values[i:])
        self._keys, self._values, self._recent = keys, values, {}
