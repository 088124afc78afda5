# crit x DIR ps|fds|mems|rss: a dump directory explained the way upstream crit prints it:
# the process tree, each task's descriptors, its memory map, and the dumped pages by VMA.
import os

from . import CritError, image

VMA_AREA_REGULAR = 1 << 0
VMA_AREA_STACK = 1 << 1
VMA_AREA_VSYSCALL = 1 << 2
VMA_AREA_VDSO = 1 << 3
VMA_FILE_PRIVATE = 1 << 6
VMA_FILE_SHARED = 1 << 7
VMA_ANON_SHARED = 1 << 8
VMA_AREA_SYSVIPC = 1 << 10
VMA_AREA_SOCKET = 1 << 11
MAP_GROWSDOWN = 0x100
PAGE_SHIFT = 12


# core_entry.tc.task_state of a zombie: CRIU dumps one as a dead task, its core alone.
TASK_DEAD = 2


class Dump:
    """A dump directory; each image is decoded once, on first use."""

    def __init__(self, path):
        self.path = path
        self.cache = {}

    def entries(self, name):
        if name not in self.cache:
            path = os.path.join(self.path, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
                self.cache[name] = image.decode(data)["entries"]
            except OSError as e:
                raise CritError("%s: %s" % (path, e.strerror))
            except CritError as e:
                raise CritError("%s: %s" % (path, e))
        return self.cache[name]

    def first(self, name):
        items = self.entries(name)
        if not items:
            raise CritError("%s: no entries" % os.path.join(self.path, name))
        return items[0]

    def files(self):
        """files.img by id; empty when there is none."""
        if "files" not in self.cache:
            exists = os.path.exists(os.path.join(self.path, "files.img"))
            items = self.entries("files.img") if exists else []
            self.cache["files"] = {f["id"]: f for f in items}
        return self.cache["files"]

    def tasks(self):
        return self.entries("pstree.img")

    def live_tasks(self):
        """The tasks that have an address space and files: not zombies, whose dump is
        their core image alone."""
        return [t for t in self.tasks()
                if self.first("core-%d.img" % t["pid"]).get("tc", {}).get("task_state")
                != TASK_DEAD]


def file_str(dump, ftype, fid):
    """How an fd or a mapping names its file: a path, pipe[INO], unix[...] or TYPE.ID."""
    f = dump.files().get(fid, {})
    if ftype == "REG":
        return f.get("reg", {}).get("name") or "unknown path"
    if ftype == "PIPE":
        return "pipe[%d]" % f["pipe"]["pipe_id"] if "pipe" in f else "pipe[?]"
    if ftype == "UNIXSK":
        return _unix_str(f.get("usk"))
    return "%s.%d" % (ftype, fid)


def _unix_str(sk):
    if not sk:
        return "unix[?]"
    name = " %s" % sk["name"] if sk.get("name") else ""
    return "unix[%d (%d)%s]" % (sk["ino"], sk["peer"], name)


def ps(dump):
    tasks = dump.tasks()
    pids = {t["pid"] for t in tasks}
    lines = ["%7s%7s%7s   %s" % ("PID", "PGID", "SID", "COMM")]

    def show(task, depth):
        comm = dump.first("core-%d.img" % task["pid"])["tc"]["comm"]
        lines.append("%7d%7d%7d   %s%s" % (task["pid"], task["pgid"], task["sid"],
                                          "    " * depth, comm))
        for kid in tasks:
            if kid["ppid"] == task["pid"]:
                show(kid, depth + 1)

    for task in tasks:
        if task["ppid"] not in pids:
            show(task, 0)
    return lines


def fds(dump):
    lines = []
    for task in dump.live_tasks():
        pid = task["pid"]
        files_id = dump.first("ids-%d.img" % pid)["files_id"]
        lines.append("%d" % pid)
        for fd in dump.entries("fdinfo-%d.img" % files_id):
            lines.append("\t%7d: %s" % (fd["fd"], file_str(dump, fd["type"], fd["id"])))
        fs = dump.first("fs-%d.img" % pid)
        lines.append("\t%7s: %s" % ("cwd", file_str(dump, "REG", fs["cwd_id"])))
        lines.append("\t%7s: %s" % ("root", file_str(dump, "REG", fs["root_id"])))
    return lines


def mems(dump):
    lines, shared_ids = [], {}
    for task in dump.live_tasks():
        mm = dump.first("mm-%d.img" % task["pid"])
        lines.append("%d" % task["pid"])
        exe = file_str(dump, "REG", mm["exe_file_id"]) if "exe_file_id" in mm else "unknown path"
        lines.append("\t%-36s    %s" % ("exe", exe))
        for vma in mm.get("vmas", []):
            where = "%08x-%08x" % (vma["start"], vma["end"])
            lines.append("\t%-36s%s%s" % (where, _prot_str(vma["prot"]),
                                          _vma_str(dump, vma, shared_ids)))
    return lines


def _prot_str(prot):
    return "".join(c if prot & bit else "-" for c, bit in (("r", 1), ("w", 2), ("x", 4)))


def _vma_str(dump, vma, shared_ids):
    """What a VMA maps, as crit x mems names it; ' *' marks a VMA criu does not map."""
    st = vma["status"]
    shared = {VMA_AREA_SYSVIPC: "ips", VMA_ANON_SHARED: "shmem", VMA_AREA_SOCKET: "packet"}
    kind = next((shared[bit] for bit in shared if st & bit), None)
    if kind:
        name = " %s[%x]" % (kind, shared_ids.setdefault(vma["shmid"], len(shared_ids) + 1))
    elif st & (VMA_FILE_PRIVATE | VMA_FILE_SHARED):
        name = " " + _file_vma_str(dump, vma)
    else:
        name = _special_vma_str(vma)
    return name if st & VMA_AREA_REGULAR else name + " *"


def _file_vma_str(dump, vma):
    name = file_str(dump, "REG", vma["shmid"])
    if vma["pgoff"]:
        name += " + %#x" % vma["pgoff"]
    if vma["status"] & VMA_FILE_SHARED:
        name += " (s)"
    return name


def _special_vma_str(vma):
    for bit, name in ((VMA_AREA_STACK, " [stack]"), (VMA_AREA_VSYSCALL, " [vsyscall]"),
                      (VMA_AREA_VDSO, " [vdso]")):
        if vma["status"] & bit:
            return name
    return " [stack?]" if vma["flags"] & MAP_GROWSDOWN else ""


def rss(dump):
    lines = []
    for task in dump.live_tasks():
        vmas = dump.first("mm-%d.img" % task["pid"]).get("vmas", [])
        lines.append("%d" % task["pid"])
        vmi, shown = 0, -1
        for pm in dump.entries("pagemap-%d.img" % task["pid"])[1:]:
            nr_pages = pm["nr_pages"] if "nr_pages" in pm else pm.get("compat_nr_pages", 0)
            while vmi < len(vmas) and vmas[vmi]["end"] <= pm["vaddr"]:
                vmi += 1
            end = pm["vaddr"] + (nr_pages << PAGE_SHIFT)
            text = ""
            while vmi < len(vmas) and vmas[vmi]["start"] < end:
                text += " ~" if vmi == shown else _rss_vma_str(dump, vmas[vmi])
                text += "\n\t%23s" % ""
                shown = vmi
                vmi += 1
            vmi = max(vmi - 1, 0)
            lines.append("%-24s%s" % ("\t%x / %-8d" % (pm["vaddr"], nr_pages), text))
    return lines


def _rss_vma_str(dump, vma):
    text = " %08x / %-8d" % (vma["start"], (vma["end"] - vma["start"]) >> PAGE_SHIFT)
    if vma["status"] & (VMA_FILE_PRIVATE | VMA_FILE_SHARED):
        text += " " + file_str(dump, "REG", vma["shmid"])
    return text


EXPLORERS = {"ps": ps, "fds": fds, "mems": mems, "rss": rss}


def explore(path, what):
    """The lines `crit x path what` prints."""
    if not os.path.isdir(path):
        raise CritError("%s: not a directory" % path)
    return EXPLORERS[what](Dump(path))
