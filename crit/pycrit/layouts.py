# What follows an image's magic: entries of one message (Entries), some followed by an
# extra payload (the *Extra classes, shown under the entry's "extra" key as upstream crit
# does), pagemap's head entry (Pagemap) and ghost files' contents (GhostFile).
import struct

from . import CritError, convert, entries, magic


def _padding(size, align):
    return -size % align


def _human_size(size):
    """A payload size as `show --nopl` prints it: 12B, 4K, 1.5M ..."""
    for unit in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if size < 1024:
            return "%d%sB" % (size, unit) if int(size) == size else "%.1f%sB" % (size, unit)
        size /= 1024.0
    return "%.1fYB" % size


def _nopl(size):
    return "... <%s>" % _human_size(size)


def _load_bytes(rd, size, align, what):
    data = rd.take(size, what)
    rd.take(_padding(size, align), what + " padding")
    return data


def _dump_bytes(value, size, align, out, where):
    data = convert.unb64(value if value is not None else "", where)
    if len(data) != size:
        raise CritError("%s: holds %d bytes, the entry says %d" % (where, len(data), size))
    out.extend(data + bytes(_padding(size, align)))


class RawExtra:
    """Raw bytes after the entry, size(msg) of them, then zeros up to align."""

    def __init__(self, size, align=1):
        self.size = size
        self.align = align

    def load(self, rd, msg, ctx):
        data = _load_bytes(rd, self.size(msg), self.align, "payload")
        return _nopl(len(data)) if ctx.nopl else convert.b64(data)

    def dump(self, value, msg, out, ctx, where):
        _dump_bytes(value, self.size(msg), self.align, out, where)


class TcpStreamExtra:
    """A TCP stream's queues: inq_len bytes then outq_len bytes."""

    def load(self, rd, msg, ctx):
        inq = _load_bytes(rd, msg.inq_len, 1, "input queue")
        outq = _load_bytes(rd, msg.outq_len, 1, "output queue")
        if ctx.nopl:
            return _nopl(len(inq) + len(outq))
        return {"inq": convert.b64(inq), "outq": convert.b64(outq)}

    def dump(self, value, msg, out, ctx, where):
        if not isinstance(value, dict):
            raise CritError('%s: expected {"inq": ..., "outq": ...}' % where)
        _dump_bytes(value.get("inq"), msg.inq_len, 1, out, where + ".inq")
        _dump_bytes(value.get("outq"), msg.outq_len, 1, out, where + ".outq")


class SemExtra:
    """A semaphore set's values: nsems u16, then zeros up to 8 bytes."""

    def load(self, rd, msg, ctx):
        data = _load_bytes(rd, 2 * msg.nsems, 8, "semaphore values")
        return _nopl(len(data)) if ctx.nopl else list(struct.unpack("<%dH" % msg.nsems, data))

    def dump(self, value, msg, out, ctx, where):
        if not isinstance(value, list) or len(value) != msg.nsems:
            raise CritError("%s: expected a list of %d semaphore values" % (where, msg.nsems))
        try:
            data = struct.pack("<%dH" % msg.nsems, *value)
        except struct.error as e:
            raise CritError("%s: %s" % (where, e))
        out.extend(data + bytes(_padding(len(data), 8)))


class MsgQueueExtra:
    """A message queue: qnum ipc_msg entries, each followed by msize bytes padded to 8.
    Shown as one list: message, its text in base64, message, text ..."""

    text = RawExtra(lambda qmsg: qmsg.msize, 8)

    def load(self, rd, msg, ctx):
        items, total = [], 0
        for i in range(msg.qnum):
            qmsg, qitem = entries.read_entry(rd, "ipc_msg", ctx, i)
            items += [qitem, self.text.load(rd, qmsg, ctx)]
            total += qmsg.msize
        return _nopl(total) if ctx.nopl else items

    def dump(self, value, msg, out, ctx, where):
        if not isinstance(value, list) or len(value) != 2 * msg.qnum:
            raise CritError("%s: expected %d messages, each followed by its text"
                            % (where, msg.qnum))
        for i in range(msg.qnum):
            qmsg = entries.write_entry(out, "ipc_msg", value[2 * i], ctx, i)
            self.text.dump(value[2 * i + 1], qmsg, out, ctx, "%s[%d]" % (where, 2 * i + 1))


class Entries:
    """Entries of one message, each followed by an extra payload if `extra` is set."""

    def __init__(self, msg_name, extra=None):
        self.msg_name = msg_name
        self.extra = extra

    def decode(self, rd, ctx):
        items = []
        while not rd.at_end():
            msg, item = entries.read_entry(rd, self.msg_name, ctx, len(items))
            if self.extra:
                item["extra"] = self.extra.load(rd, msg, ctx)
            items.append(item)
        return items

    def encode(self, items, out, ctx):
        for i, item in enumerate(items):
            item = _as_object(item, i)
            payload = item.pop("extra", None) if self.extra else None
            msg = entries.write_entry(out, self.msg_name, item, ctx, i)
            if self.extra:
                self.extra.dump(payload, msg, out, ctx, "entry %d.extra" % i)


class Pagemap:
    """pagemap-*.img: a pagemap_head, then pagemap_entry records."""

    def decode(self, rd, ctx):
        items = []
        while not rd.at_end():
            name = "pagemap_head" if not items else "pagemap_entry"
            items.append(entries.read_entry(rd, name, ctx, len(items))[1])
        return items

    def encode(self, items, out, ctx):
        for i, item in enumerate(items):
            name = "pagemap_head" if i == 0 else "pagemap_entry"
            entries.write_entry(out, name, _as_object(item, i), ctx, i)


class GhostFile:
    """ghost-file-*.img: a ghost_file_entry, then either the file's contents to the end
    (its "extra") or, when it says chunks, ghost_chunk_entry records each with len bytes."""

    chunk_data = RawExtra(lambda chunk: chunk.len)

    def decode(self, rd, ctx):
        head, item = entries.read_entry(rd, "ghost_file_entry", ctx, 0)
        items = [item]
        if not head.chunks:
            data = rd.rest()
            item["extra"] = _nopl(len(data)) if ctx.nopl else convert.b64(data)
            return items
        while not rd.at_end():
            chunk, item = entries.read_entry(rd, "ghost_chunk_entry", ctx, len(items))
            item["extra"] = self.chunk_data.load(rd, chunk, ctx)
            items.append(item)
        return items

    def encode(self, items, out, ctx):
        if not items:
            raise CritError("a ghost file image needs its ghost_file_entry")
        item = _as_object(items[0], 0)
        contents = item.pop("extra", None)
        head = entries.write_entry(out, "ghost_file_entry", item, ctx, 0)
        if not head.chunks:
            if len(items) > 1:
                raise CritError("entry 1: a ghost file without chunks has one entry")
            out.extend(convert.unb64(contents if contents is not None else "", "entry 0.extra"))
            return
        if contents is not None:
            raise CritError("entry 0: a chunked ghost file keeps its data in the chunks")
        for i, item in enumerate(items[1:], 1):
            item = _as_object(item, i)
            payload = item.pop("extra", None)
            chunk = entries.write_entry(out, "ghost_chunk_entry", item, ctx, i)
            self.chunk_data.dump(payload, chunk, out, ctx, "entry %d.extra" % i)


def _as_object(item, index):
    if not isinstance(item, dict):
        raise CritError("entry %d: expected an object" % index)
    return dict(item)


def _shm_size(msg):
    """Shared memory contents follow the entry unless they went to pagemap/pages images."""
    return 0 if getattr(msg, "in_pagemaps", False) else msg.size


SPECIAL = {
    "PAGEMAP": Pagemap(),
    "GHOST_FILE": GhostFile(),
    "PIPES_DATA": Entries("pipe_data_entry", RawExtra(lambda m: m.bytes)),
    "FIFO_DATA": Entries("pipe_data_entry", RawExtra(lambda m: m.bytes)),
    "SK_QUEUES": Entries("sk_packet_entry", RawExtra(lambda m: m.length)),
    "BPFMAP_DATA": Entries("bpfmap_data_entry",
                           RawExtra(lambda m: m.keys_bytes + m.values_bytes)),
    "IPCNS_SHM": Entries("ipc_shm_entry",
                         RawExtra(_shm_size, 4)),
    "IPCNS_SEM": Entries("ipc_sem_entry", SemExtra()),
    "IPCNS_MSG": Entries("ipc_msg_entry", MsgQueueExtra()),
    "TCP_STREAM": Entries("tcp_stream_entry", TcpStreamExtra()),
}


def layout(name):
    """How the entries of image `name` are laid out."""
    return SPECIAL.get(name) or Entries(magic.IMAGES[name][1])
