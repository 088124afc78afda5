# Whole image files <-> {"magic": NAME, "entries": [...]}: the magic words at the start,
# then the entries as layouts.py lays them out for that image.
import struct

from . import CritError, entries, layouts, magic


def _image_name(rd):
    """Reads the magic word(s); returns the image's name (CORE, INVENTORY, ...)."""
    first = rd.u32("magic")
    if first not in (magic.IMG_COMMON, magic.IMG_SERVICE):
        name = magic.BY_MAGIC.get(first)
        if name is None or magic.first_word(name) is not None:
            raise CritError("unknown magic %#x: not a CRIU image (pages-*.img and other "
                            "raw data images have no magic)" % first)
        return name
    second = rd.u32("image magic")
    name = magic.BY_MAGIC.get(second)
    if name is None:
        raise CritError("unknown image magic %#x (after %#x): unknown/unsupported image"
                        % (second, first))
    if magic.first_word(name) != first:
        raise CritError("corrupt image: %s magic after %#x, expected %#x"
                        % (name, first, magic.first_word(name) or 0))
    return name


def _check_decodable(name):
    if magic.IMAGES[name][1] is None:
        raise CritError("%s image holds raw data, not protobuf entries: unsupported" % name)


def decode(data, pretty=False, nopl=False):
    """An image's bytes as {"magic": NAME, "entries": [...]}."""
    rd = entries.Reader(data)
    name = _image_name(rd)
    _check_decodable(name)
    ctx = entries.Ctx(name, pretty, nopl)
    return {"magic": name, "entries": layouts.layout(name).decode(rd, ctx)}


def info(data):
    """{"magic": NAME, "count": N}; pagemap's head entry is not counted."""
    img = decode(data, nopl=True)
    count = len(img["entries"])
    if img["magic"] == "PAGEMAP" and count:
        count -= 1
    return {"magic": img["magic"], "count": count}


def encode(img):
    """The bytes of an image given as {"magic": NAME, "entries": [...]}."""
    name, items = _checked_top(img)
    _check_decodable(name)
    out = bytearray()
    first = magic.first_word(name)
    if first is not None:
        out.extend(struct.pack("<I", first))
    out.extend(struct.pack("<I", magic.IMAGES[name][0]))
    layouts.layout(name).encode(items, out, entries.Ctx(name))
    return bytes(out)


def _checked_top(img):
    if not isinstance(img, dict) or set(img) != {"magic", "entries"}:
        raise CritError('expected {"magic": NAME, "entries": [...]} at the top')
    name, items = img["magic"], img["entries"]
    if not isinstance(name, str) or name not in magic.IMAGES:
        raise CritError("unknown image magic name %r" % (name,))
    if not isinstance(items, list):
        raise CritError('"entries" must be a list')
    return name, items
