# One protobuf message <-> a JSON-ready dict, as upstream crit spells it: set fields in
# field-number order, enums by name, bytes as base64, --pretty styles from styles.py.
# Fields the schema does not know are kept, raw, under UNKNOWN_KEY: encode puts them back.
import base64
import binascii
import contextlib
import ipaddress
import os
import quopri
import sys

from google.protobuf.descriptor import FieldDescriptor as FD

from . import CritError, styles

UNKNOWN_KEY = "__unknown__"

INT_TYPES = frozenset((FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64,
                       FD.TYPE_SINT32, FD.TYPE_SINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64,
                       FD.TYPE_SFIXED32, FD.TYPE_SFIXED64))
FLOAT_TYPES = frozenset((FD.TYPE_FLOAT, FD.TYPE_DOUBLE))
KERNEL_MINORBITS = 20


def b64(data):
    """Bytes as upstream crit writes them: base64 in lines of 76, newline-terminated."""
    return base64.encodebytes(data).decode("ascii")


def unb64(text, where):
    if not isinstance(text, str):
        raise CritError("%s: expected a base64 string, got %s" % (where, _kind(text)))
    try:
        return binascii.a2b_base64(text.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError) as e:
        raise CritError("%s: bad base64: %s" % (where, e))


def _kind(value):
    return type(value).__name__


@contextlib.contextmanager
def quiet_stderr():
    """Silences the C++ protobuf library's own log lines (a string that is not UTF-8):
    crit reports what matters itself."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# --- message -> dict --------------------------------------------------------------------

def has_unknown(msg):
    """True when msg (or a message inside it) holds fields its schema does not define."""
    known = type(msg)()
    known.CopyFrom(msg)
    known.DiscardUnknownFields()
    return known.ByteSize() != msg.ByteSize()


def _unknown_bytes(msg):
    rest = type(msg)()
    rest.CopyFrom(msg)
    for field, _ in rest.ListFields():
        rest.ClearField(field.name)
    return rest.SerializePartialToString()


def to_dict(msg, pretty=False, keep_unknown=False, all_hex=False):
    """msg as a dict; keep_unknown: look for unknown fields (see has_unknown)."""
    out = {}
    name = msg.DESCRIPTOR.full_name
    for field, value in msg.ListFields():
        style = styles.style(name, field.name)
        hexed = all_hex or style == styles.HEX
        if field.label == FD.LABEL_REPEATED:
            out[field.name] = _list_to_json(field, value, style, pretty, hexed, keep_unknown)
        else:
            out[field.name] = _to_json(field, value, style, pretty, hexed, keep_unknown)
    if keep_unknown:
        raw = _unknown_bytes(msg)
        if raw:
            out[UNKNOWN_KEY] = b64(raw)
    return out


def _list_to_json(field, values, style, pretty, hexed, keep_unknown):
    if pretty and style == styles.IPADDR and len(values) in (1, 4):
        return [_ip_to_str(values)]
    return [_to_json(field, v, style, pretty, hexed, keep_unknown) for v in values]


def _to_json(field, value, style, pretty, hexed, keep_unknown):
    t = field.type
    if t == FD.TYPE_MESSAGE or t == FD.TYPE_GROUP:
        return to_dict(value, pretty, keep_unknown, hexed)
    if t == FD.TYPE_BYTES:
        return quopri.encodestring(value).decode("ascii") if style == styles.QUOPRI else b64(value)
    if t == FD.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known else value
    if t == FD.TYPE_STRING:
        # The C++ protobuf hands back bytes for a string that is not UTF-8 (a file name
        # can be anything): those bytes are kept as surrogate escapes (\udcXX in JSON).
        return value if isinstance(value, str) else value.decode("utf-8", "surrogateescape")
    if t in INT_TYPES and pretty:
        return _pretty_int(value, style, hexed)
    return value


def _pretty_int(value, style, hexed):
    if hexed:
        return "%#x" % value
    kind = style[0] if style else None
    if kind == "dev":
        return "%d:%d" % (value >> KERNEL_MINORBITS, value & ((1 << KERNEL_MINORBITS) - 1))
    if kind == "odev":
        return "%d:%d" % (os.major(value), os.minor(value))
    if kind == "flags":
        return _flags_to_str(value, style[1])
    if kind == "names":
        return style[1].get(value, value)
    return value


def _flags_to_str(value, table):
    parts = [name for name, bit in table if value & bit]
    rest = value & ~sum(bit for _, bit in table)
    if rest:
        parts.append("%#x" % rest)
    return " | ".join(parts)


def _ip_to_str(words):
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    return ipaddress.ip_address(raw).compressed


# --- dict -> message --------------------------------------------------------------------

def from_dict(data, msg, where):
    """Fill msg from data (plain or --pretty form); where names it in errors."""
    if not isinstance(data, dict):
        raise CritError("%s: expected an object, got %s" % (where, _kind(data)))
    fields = msg.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        if key == UNKNOWN_KEY:
            continue
        field = fields.get(key)
        if field is None:
            raise CritError("%s: %s has no field %r" % (where, msg.DESCRIPTOR.full_name, key))
        _set_field(msg, field, value, "%s.%s" % (where, key))
    if UNKNOWN_KEY in data:
        _merge_unknown(msg, data[UNKNOWN_KEY], where)
    return msg


def _merge_unknown(msg, text, where):
    try:
        msg.MergeFromString(unb64(text, where + "." + UNKNOWN_KEY))
    except Exception as e:
        raise CritError("%s.%s: not protobuf fields: %s" % (where, UNKNOWN_KEY, e))


def _set_field(msg, field, value, where):
    style = styles.style(msg.DESCRIPTOR.full_name, field.name)
    if field.type == FD.TYPE_STRING and not _all_utf8(value):
        _merge_raw_strings(msg, field, value, where)
    elif field.label == FD.LABEL_REPEATED:
        _set_list(getattr(msg, field.name), field, value, style, where)
    elif field.type == FD.TYPE_MESSAGE:
        sub = getattr(msg, field.name)
        sub.SetInParent()
        from_dict(value, sub, where)
    else:
        _checked(lambda: setattr(msg, field.name, _from_json(field, value, style, where)),
                 where)


def _all_utf8(value):
    """False when value (a string, or a list of them) holds bytes that are not UTF-8."""
    try:
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _merge_raw_strings(msg, field, value, where):
    """Sets a string field that is not UTF-8 as it came: the Python protobuf refuses such
    a str, but parses its wire form (tag, length, bytes)."""
    wire = bytearray()
    for text in value if isinstance(value, list) else [value]:
        raw = _expect(text, str, where).encode("utf-8", "surrogateescape")
        wire += _varint(field.number << 3 | 2) + _varint(len(raw)) + raw
    if field.label != FD.LABEL_REPEATED:
        msg.ClearField(field.name)
    with quiet_stderr():
        msg.MergeFromString(bytes(wire))


def _varint(n):
    out = bytearray()
    while n > 0x7f:
        out.append(n & 0x7f | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _set_list(container, field, values, style, where):
    if not isinstance(values, list):
        raise CritError("%s: expected a list, got %s" % (where, _kind(values)))
    if style == styles.IPADDR and len(values) == 1 and isinstance(values[0], str):
        values = _str_to_ip_words(values[0], where)
    for i, value in enumerate(values):
        item_where = "%s[%d]" % (where, i)
        if field.type == FD.TYPE_MESSAGE:
            from_dict(value, container.add(), item_where)
        else:
            item = _from_json(field, value, style, item_where)
            _checked(lambda: container.append(item), item_where)


def _checked(action, where):
    """Run a protobuf setter; its range and type errors become CritErrors."""
    try:
        action()
    except (TypeError, ValueError) as e:
        raise CritError("%s: %s" % (where, e))


def _from_json(field, value, style, where):
    t = field.type
    if t == FD.TYPE_BYTES:
        if style == styles.QUOPRI and isinstance(value, str):
            return quopri.decodestring(value.encode("utf-8", "surrogateescape"))
        return unb64(value, where)
    if t == FD.TYPE_ENUM:
        return _enum_from_json(field, value, where)
    if t == FD.TYPE_STRING:
        return _expect(value, str, where)
    if t == FD.TYPE_BOOL:
        return _expect(value, bool, where)
    if t in FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CritError("%s: expected a number, got %s" % (where, _kind(value)))
        return value
    if isinstance(value, str):
        return _int_from_str(value, style, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CritError("%s: expected an integer, got %s" % (where, _kind(value)))
    return value


def _expect(value, cls, where):
    if not isinstance(value, cls):
        raise CritError("%s: expected %s, got %s" % (where, cls.__name__, _kind(value)))
    return value


def _enum_from_json(field, value, where):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    known = field.enum_type.values_by_name.get(value) if isinstance(value, str) else None
    if known is None:
        raise CritError("%s: %r is not a value of enum %s"
                        % (where, value, field.enum_type.full_name))
    return known.number


def _int_from_str(text, style, where):
    kind = style[0] if style else None
    try:
        if kind in ("dev", "odev") and ":" in text:
            return _dev_from_str(text, kind)
        if kind == "flags":
            return _flags_from_str(text, style[1])
        if kind == "names":
            for number, name in style[1].items():
                if name == text:
                    return number
        return int(text, 0)
    except ValueError:
        raise CritError("%s: %r is not a number%s" % (where, text, _hint(kind)))


def _hint(kind):
    return {"dev": " or MAJOR:MINOR", "odev": " or MAJOR:MINOR",
            "flags": " or FLAG | FLAG", "names": " or a known name"}.get(kind, "")


def _dev_from_str(text, kind):
    major, minor = (int(x) for x in text.split(":"))
    if kind == "odev":
        return os.makedev(major, minor)
    return major << KERNEL_MINORBITS | minor


def _flags_from_str(text, table):
    names = dict(table)
    words = [w.strip() for w in text.split("|")] if text.strip() else []
    value = 0
    for word in words:
        value |= names[word] if word in names else int(word, 0)
    return value


def _str_to_ip_words(text, where):
    try:
        raw = ipaddress.ip_address(text).packed
    except ValueError as e:
        raise CritError("%s: %s" % (where, e))
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]
