"""What the parts of a columnar record file decode to, learnt without decoding them: a
Parquet page's uncompressed size from its header, each Arrow IPC record batch's rows and
decoded bytes from its message's metadata, and each row's decoded bytes from Arrow's and
numpy's kernels. Pure Python, no Django; pyarrow and numpy are imported when used."""

from __future__ import annotations

from typing import IO, Any


def page_uncompressed_size(handle: IO[bytes], offset: int | None) -> int | None:
    """The uncompressed size of the Parquet page at ``offset``, from its header (Thrift's
    compact protocol: PageHeader's fields 1-3 are i32s, type, uncompressed size and
    compressed size, each a one-byte field header and a zigzag varint); None if it does not
    read as one."""
    if not offset or offset < 0:
        return None
    handle.seek(offset)
    head = handle.read(32)
    position = 0
    values = []
    for _ in range(3):
        if position >= len(head) or head[position] != 0x15:  # field delta 1, type i32
            return None
        position += 1
        value = shift = 0
        while True:
            if position >= len(head) or shift > 35:
                return None
            byte = head[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append((value >> 1) ^ -(value & 1))
    return values[1] if values[1] >= 0 else None


def ipc_decoded_sizes(local: str) -> list[tuple[int | None, int]]:
    """``(rows, decoded bytes)`` of every record batch of an Arrow IPC file or stream (rows
    None for a dictionary batch), read from the messages' metadata: a compressed buffer
    starts with its decoded length, so nothing is decompressed to learn it."""
    import pyarrow as pa

    sizes: list[tuple[int | None, int]] = []
    with pa.memory_map(local, "r") as source:
        source.seek(8 if source.read(6) == b"ARROW1" else 0)
        reader = pa.ipc.MessageReader.open_stream(source)
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return sizes
            if message.type not in ("record batch", "dictionary"):
                continue
            is_dictionary = message.type == "dictionary"
            rows, buffers, compressed = _ipc_batch_layout(message.metadata.to_pybytes(), is_dictionary)
            body = memoryview(message.body) if message.body is not None else memoryview(b"")
            decoded = 0
            for offset, length in buffers:
                if offset < 0 or length < 0 or offset + length > len(body):
                    raise ValueError("a buffer lies outside its message")
                if compressed and length >= 8:
                    prefix = int.from_bytes(body[offset : offset + 8], "little", signed=True)
                    decoded += length - 8 if prefix == -1 else prefix
                else:
                    decoded += length
            sizes.append((None if is_dictionary else rows, decoded))


def _ipc_batch_layout(meta: bytes, is_dictionary: bool) -> tuple[int, list[tuple[int, int]], bool]:
    """Rows, buffers ``(offset, length)`` and whether the body is compressed, from the
    flatbuffer of an IPC message (Arrow's format/Message.fbs: Message.header is a
    RecordBatch, or a DictionaryBatch whose ``data`` is one)."""

    def number(at: int, size: int, signed: bool = False) -> int:
        if at < 0 or at + size > len(meta):
            raise ValueError("damaged message metadata")
        return int.from_bytes(meta[at : at + size], "little", signed=signed)

    def table(at: int) -> tuple[int, int]:
        return at, at - number(at, 4, signed=True)

    def field(where: tuple[int, int], index: int) -> int | None:
        at, vtable = where
        slot = 4 + 2 * index
        if slot + 2 > number(vtable, 2):
            return None
        offset = number(vtable + slot, 2)
        return at + offset if offset else None

    def target(at: int | None) -> tuple[int, int]:
        if at is None:
            raise ValueError("damaged message metadata")
        return table(at + number(at, 4))

    batch = target(field(table(number(0, 4)), 2))  # Message.header
    if is_dictionary:
        batch = target(field(batch, 1))  # DictionaryBatch.data
    length_at = field(batch, 0)  # RecordBatch.length
    rows = number(length_at, 8, signed=True) if length_at is not None else 0
    buffers: list[tuple[int, int]] = []
    buffers_at = field(batch, 2)  # RecordBatch.buffers: [Buffer{offset: long, length: long}]
    if buffers_at is not None:
        vector = buffers_at + number(buffers_at, 4)
        count = number(vector, 4)
        if vector + 4 + 16 * count > len(meta):
            raise ValueError("damaged message metadata")
        for k in range(count):
            base = vector + 4 + 16 * k
            buffers.append((number(base, 8, signed=True), number(base + 8, 8, signed=True)))
    if rows < 0:
        raise ValueError("damaged message metadata")
    return rows, buffers, field(batch, 3) is not None  # RecordBatch.compression


def row_sizes(batch: Any) -> Any:
    """What each row of a record batch decodes to, in bytes (a numpy array): text and binary
    by their length, dictionary values by the value each row points at, lists and structs by
    what they hold, fixed-width values by their width. Computed with Arrow's and numpy's
    kernels, without making a Python object of a row."""
    import numpy as np

    sizes = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        sizes += _value_sizes(column)
    return sizes


def _value_sizes(array: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(array)
    data_type = array.type
    if pa.types.is_dictionary(data_type):
        values = _value_sizes(array.dictionary)
        if not len(values):
            return np.zeros(count, dtype=np.int64)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(array.is_valid().to_numpy(zero_copy_only=False), values[indices], 0)
    if text_like(data_type):
        return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        child = array.flatten()
        sizes = np.full(count, 8, dtype=np.int64)
        if len(child):
            parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
            if len(parents) != len(child):  # not seen; spread what the values hold evenly rather than guess
                return sizes + int(_value_sizes(child).sum()) // max(count, 1)
            sizes += np.bincount(parents, weights=_value_sizes(child), minlength=count).astype(np.int64)
        return sizes
    if pa.types.is_struct(data_type):
        sizes = np.zeros(count, dtype=np.int64)
        for child in array.flatten():
            sizes += _value_sizes(child)
        return sizes
    try:
        width = max(data_type.bit_width // 8, 1)
    except ValueError:  # not a fixed-width type: its bytes spread evenly over its rows
        width = array.nbytes // max(count, 1)
    return np.full(count, width, dtype=np.int64)


def text_like(data_type: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
    )
