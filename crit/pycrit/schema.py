# The Python modules protoc generates from images/*.proto (the pb2/ directory beside this
# package, filled by `make crit`), and their message classes by .proto name.
import glob
import importlib
import os
import sys

from . import CritError

PB2_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pb2")

_classes = None


def _import_module(path):
    name = os.path.basename(path)[:-len(".py")]
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise CritError("cannot load %s (is python3-protobuf installed?): %s" % (path, e))
    except Exception as e:
        raise CritError("cannot load %s (regenerate it: make crit): %s" % (path, e))


def _load_classes():
    paths = sorted(glob.glob(os.path.join(PB2_DIR, "*_pb2.py")))
    if not paths:
        raise CritError("no protobuf modules in %s: build them with `make crit`" % PB2_DIR)
    sys.path.insert(0, PB2_DIR)
    classes = {}
    for path in paths:
        mod = _import_module(path)
        for name in mod.DESCRIPTOR.message_types_by_name:
            classes[name] = getattr(mod, name)
    return classes


def message_class(name):
    """The generated class of message `name`, or None when images/ does not define it."""
    global _classes
    if _classes is None:
        _classes = _load_classes()
    return _classes.get(name)


def new_message(name, image):
    """An empty `name` message; a clear error when images/ does not define it."""
    cls = message_class(name)
    if cls is None:
        raise CritError("unsupported image %s: images/*.proto define no message %s"
                        % (image, name))
    return cls()
