# Reading and writing the framed entries of an image: a u32 little-endian length, then a
# packed protobuf message. Reader is a cursor whose every short read is a CritError that
# says what was cut and at which byte offset.
import struct

from google.protobuf.message import DecodeError, EncodeError

from . import CritError, convert, schema


class Ctx:
    """What a decode or encode is working on: the image name and the output options."""

    def __init__(self, image, pretty=False, nopl=False):
        self.image = image
        self.pretty = pretty
        self.nopl = nopl


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def at_end(self):
        return self.pos >= len(self.data)

    def take(self, size, what):
        left = len(self.data) - self.pos
        if size > left:
            raise CritError("truncated image: %s needs %d bytes at offset %d, %d left"
                            % (what, size, self.pos, left))
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def rest(self):
        chunk = self.data[self.pos:]
        self.pos = len(self.data)
        return chunk

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]


def read_entry(rd, msg_name, ctx, index):
    """The next entry as (message, dict)."""
    what = "entry %d (%s)" % (index, msg_name)
    start = rd.pos
    size = rd.u32(what + " length")
    body = rd.take(size, what)
    msg = schema.new_message(msg_name, ctx.image)
    try:
        with convert.quiet_stderr():
            msg.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise CritError("corrupt image: %s at offset %d: %s" % (what, start, e))
    if not msg.IsInitialized():
        raise CritError("corrupt image: %s at offset %d lacks required field(s) %s"
                        % (what, start, ", ".join(msg.FindInitializationErrors())))
    return msg, convert.to_dict(msg, ctx.pretty, convert.has_unknown(msg))


def write_entry(out, msg_name, data, ctx, index):
    """Append entry `index` (a dict) to out; returns the message, for payload sizes."""
    where = "entry %d" % index
    msg = convert.from_dict(data, schema.new_message(msg_name, ctx.image), where)
    try:
        with convert.quiet_stderr():
            body = msg.SerializeToString()
    except EncodeError:
        raise CritError("%s: %s lacks required field(s) %s"
                        % (where, msg_name, ", ".join(msg.FindInitializationErrors())))
    out.extend(struct.pack("<I", len(body)) + body)
    return msg
