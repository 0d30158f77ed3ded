"""The cache a request leaves behind, in storage dtypes, and its serialisation to bytes and back.

Per layer, by attention kind:

- ``gqa``: rows ``k`` (tokens, kv_heads, head_dim) and ``v`` (tokens, kv_heads, v_head_dim), keys stored
  after the rotary embedding (so no position is needed to use them).
- ``mla``: rows ``latent`` (tokens, kv_lora_rank) and ``rope`` (tokens, qk_rope_head_dim), the rotated
  decoupled key shared by all heads.
- ``swa``: GQA rows kept in a ring of ``window`` slots; ``rows`` returns them oldest first.
- ``linear``: states ``state`` (heads, key_head_dim, value_head_dim) and ``conv`` (conv_kernel - 1,
  channels), the last inputs of the short convolution, oldest first.

``nbytes`` is the payload (what ``physics.memory.cache_bytes`` prices); the token count ``length`` is
metadata the scheduler holds anyway (it fixes the rotary position of the next token). A cache is updated in
place by the kernel, as a serving engine's is (copying it each step would add traffic the contract does not
price); ``copy`` gives an independent one.

Serialised form: ``MAGIC``, an 8-byte little-endian header length, a JSON header (length; per layer its
kind, window, and each array's numpy dtype and shape), then the arrays' bytes in header order.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

MAGIC = b"PRFAAS-KV1\n"


class LayerCache:
    """One layer's stored rows (growing or windowed) and fixed states."""

    def __init__(
        self,
        *,
        kind: str,
        rows: Mapping[str, NDArray[Any]],
        states: Mapping[str, NDArray[Any]],
        window: int = 0,
    ) -> None:
        """``rows``: each stream's stored rows so far (oldest first, equal counts); ``states``: fixed arrays."""
        self.kind = kind
        self.window = window
        counts = {len(r) for r in rows.values()}
        assert len(counts) <= 1, "row streams must have equal lengths"
        self.filled = counts.pop() if counts else 0
        assert not window or self.filled <= window
        self.head = 0  # ring start (windowed layers)
        capacity = window if window else max(self.filled, 16)
        self._buffers = {}
        for name, r in rows.items():
            buffer = np.empty((capacity, *r.shape[1:]), dtype=r.dtype)
            buffer[: self.filled] = r
            self._buffers[name] = buffer
        self.states: dict[str, NDArray[Any]] = dict(states)

    def rows(self, name: str) -> NDArray[Any]:
        """Stored rows of one stream, oldest first."""
        buffer = self._buffers[name]
        if self.head == 0:
            return buffer[: self.filled]
        return np.concatenate([buffer[self.head : self.filled], buffer[: self.head]])

    @property
    def streams(self) -> tuple[str, ...]:
        """Names of the row streams."""
        return tuple(self._buffers)

    def append(self, new_rows: Mapping[str, NDArray[Any]]) -> None:
        """Store new rows (stored dtype); a windowed layer keeps only the last ``window``."""
        n = len(next(iter(new_rows.values())))
        if not self.window:
            needed = self.filled + n
            for name, r in new_rows.items():
                buffer = self._buffers[name]
                if needed > len(buffer):
                    grown = np.empty((max(needed, 2 * len(buffer)), *buffer.shape[1:]), dtype=buffer.dtype)
                    grown[: self.filled] = buffer[: self.filled]
                    self._buffers[name] = buffer = grown
                buffer[self.filled : needed] = r
            self.filled = needed
            return
        # Ring: write each chunk of at most `window` rows at distinct slots after the newest row.
        for start in range(0, n, self.window):
            chunk = {name: r[start : start + self.window] for name, r in new_rows.items()}
            m = len(next(iter(chunk.values())))
            slots = (self.head + self.filled + np.arange(m)) % self.window
            for name, r in chunk.items():
                self._buffers[name][slots] = r
            overflow = max(0, self.filled + m - self.window)
            self.head = (self.head + overflow) % self.window
            self.filled = min(self.window, self.filled + m)

    @property
    def nbytes(self) -> int:
        """Payload bytes: stored rows plus states."""
        row_bytes = sum(self.filled * math.prod(b.shape[1:]) * b.itemsize for b in self._buffers.values())
        return int(row_bytes + sum(s.nbytes for s in self.states.values()))

    def copy(self) -> LayerCache:
        """An independent copy."""
        return LayerCache(
            kind=self.kind,
            rows={name: self.rows(name).copy() for name in self._buffers},
            states={name: s.copy() for name, s in self.states.items()},
            window=self.window,
        )


class Cache:
    """Everything one request leaves behind: a ``LayerCache`` per decoder layer and its token count."""

    def __init__(self, layers: list[LayerCache], length: int = 0) -> None:
        """``length``: tokens seen so far (the next token's position)."""
        self.layers = layers
        self.length = length

    @property
    def nbytes(self) -> int:
        """Payload bytes of every layer (compare ``physics.memory.cache_bytes(arch, length)``)."""
        return sum(layer.nbytes for layer in self.layers)

    def copy(self) -> Cache:
        """An independent copy."""
        return Cache([layer.copy() for layer in self.layers], self.length)

    def arrays(self) -> list[tuple[str, NDArray[Any]]]:
        """Every stored array, labelled ``layer.kind.name``, in serialisation order."""
        out = []
        for i, layer in enumerate(self.layers):
            out += [(f"{i}.{layer.kind}.{name}", layer.rows(name)) for name in layer.streams]
            out += [(f"{i}.{layer.kind}.{name}", s) for name, s in layer.states.items()]
        return out

    def to_bytes(self) -> bytes:
        """Serialise (module docstring): what would cross the link."""
        layers, payload = [], []
        for layer in self.layers:
            entry: dict[str, Any] = {"kind": layer.kind, "window": layer.window, "rows": {}, "states": {}}
            for name in layer.streams:
                rows = np.ascontiguousarray(layer.rows(name))
                entry["rows"][name] = {"dtype": rows.dtype.str, "shape": list(rows.shape)}
                payload.append(rows.tobytes())
            for name, state in layer.states.items():
                entry["states"][name] = {"dtype": state.dtype.str, "shape": list(state.shape)}
                payload.append(np.ascontiguousarray(state).tobytes())
            layers.append(entry)
        header = json.dumps({"length": self.length, "layers": layers}).encode()
        return MAGIC + struct.pack("<Q", len(header)) + header + b"".join(payload)

    @classmethod
    def from_bytes(cls, data: bytes) -> Cache:
        """Restore a cache serialised by ``to_bytes``."""
        if not data.startswith(MAGIC):
            raise ValueError("not a serialised reference cache")
        offset = len(MAGIC)
        (size,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        header = json.loads(data[offset : offset + size])
        offset += size

        def take(spec: Mapping[str, Any]) -> NDArray[Any]:
            nonlocal offset
            dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
            count = math.prod(shape)
            array = np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
            offset += count * dtype.itemsize
            return array

        layers = []
        for entry in header["layers"]:
            rows = {name: take(spec) for name, spec in entry["rows"].items()}
            states = {name: take(spec) for name, spec in entry["states"].items()}
            layers.append(LayerCache(kind=entry["kind"], rows=rows, states=states, window=entry["window"]))
        if offset != len(data):
            raise ValueError(f"serialised cache has {len(data) - offset} trailing bytes")
        return cls(layers, int(header["length"]))
