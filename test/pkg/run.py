#!/usr/bin/env python3
# The packaging test (part of `make test`, as root): what a distribution checks before it
# ships criu, one line per step, and "pkg: N passed, N failed" at the end.
#
#   man           criu(8) documents every command and option of criu --help
#   build         dpkg-buildpackage -us -uc -b of a copy of the tree (scripts/build-deb.sh)
#   version       the packages' version is criu's (criu/include/version.h)
#   lintian       no lintian error on the packages (warnings are listed)
#   reproducible  a second build in a directory of another name gives the same .debs
#   contents      no build path in any packaged file; criu, the plugin and libsoccr are
#                 linked with full RELRO and carry no test hook; libsoccr's soname
#   install       dpkg --root installs the packages into a scratch root whose dpkg
#                 database holds the machine's entries of their dependencies
#   use           in a private mount namespace with the scratch root's /usr over the
#                 machine's: /usr/sbin/criu check, a dump and restore of a test program
#                 with the installed plugin directory, /usr/bin/crit on its images, a
#                 program built against <criu/soccr.h> and -lsoccr run
#   purge         dpkg --root --purge removes every path dpkg -L listed, and nothing is left
#
# The machine's own packages are never touched: Debian's criu (whose crit the zdtm suite
# uses) stays installed. Output: test/out/pkg/.
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time

TEST = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = os.path.dirname(TEST)
OUT = os.path.join(TEST, 'out', 'pkg')
PACKAGES = ('criu-cleanroom', 'criu-cleanroom-amdgpu-plugin', 'libsoccr1', 'libsoccr-dev')
SOCCR_SO = '/usr/lib/libsoccr.so.1'
# A zdtm test program (built by `make -C test`): it checks its own memory after restore.
PROGRAM = os.path.join(TEST, 'bin', 'mem_anon_private')
PR_SET_CHILD_SUBREAPER = 36


class StepFailure(Exception):
    pass


def run(cmd, **kwargs):
    """Runs cmd; its stdout, or StepFailure with the command and its stderr."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise StepFailure('%s: exit %d: %s' % (' '.join(cmd), proc.returncode,
                                                (proc.stderr or proc.stdout).strip()[-800:]))
    return proc.stdout


def debs(build_dir):
    """The binary packages of a build, by package name (debug symbols included)."""
    found = {}
    for name in sorted(os.listdir(build_dir)):
        if name.endswith('.deb'):
            found[name.split('_')[0]] = os.path.join(build_dir, name)
    return found


def criu_version():
    with open(os.path.join(TOP, 'criu', 'include', 'version.h')) as header:
        return re.search(r'#define CRIU_VERSION "([^"]+)"', header.read()).group(1)


# ---- the steps ---------------------------------------------------------------------------

def step_man(ctx):
    run([os.path.join(TOP, 'scripts', 'check-man-options.py'),
         os.path.join(TOP, 'criu', 'criu'), os.path.join(TOP, 'Documentation', 'criu.8.txt')])
    return 'criu(8) documents every command and option of criu --help'


def build(build_dir):
    start = time.monotonic()
    run([os.path.join(TOP, 'scripts', 'build-deb.sh'), build_dir])
    return time.monotonic() - start


def step_build(ctx):
    seconds = build(ctx['build'])
    ctx['debs'] = debs(ctx['build'])
    missing = [p for p in PACKAGES if p not in ctx['debs']]
    if missing:
        raise StepFailure('no package %s in %s' % (', '.join(missing), ctx['build']))
    return '%s built in %.1f s' % (', '.join(sorted(ctx['debs'])), seconds)


def step_version(ctx):
    want = criu_version()
    for name in PACKAGES:
        got = run(['dpkg-deb', '-f', ctx['debs'][name], 'Version']).strip()
        if got != want:
            raise StepFailure('%s is version %s, criu -V says %s (debian/changelog and '
                              'criu/include/version.h must agree)' % (name, got, want))
    return 'all %d packages are version %s, as criu -V' % (len(PACKAGES), want)


def step_lintian(ctx):
    changes = [f for f in os.listdir(ctx['build']) if f.endswith('.changes')]
    proc = subprocess.run(['lintian', '--fail-on', 'error', os.path.join(ctx['build'],
                                                                          changes[0])],
                          capture_output=True, text=True)
    tags = [line for line in proc.stdout.splitlines() if re.match(r'[EWIPX]: ', line)]
    if proc.returncode != 0:
        raise StepFailure('lintian: ' + '; '.join(tags or [proc.stderr.strip()]))
    warnings = [t for t in tags if t.startswith('W: ')]
    return 'no error' + ('; warnings: ' + '; '.join(warnings) if warnings else ', no warning')


def step_reproducible(ctx):
    # Another directory name, so that a build path in any file would show.
    other = os.path.join(OUT, 'second-build-elsewhere')
    build(other)
    second = debs(other)
    differ = [n for n in ctx['debs'] if n not in second or
              open(ctx['debs'][n], 'rb').read() != open(second[n], 'rb').read()]
    if differ:
        raise StepFailure('built twice, these differ: ' + ', '.join(differ))
    return '%d .debs identical byte for byte across two builds' % len(second)


def elf_hardening(path):
    """What is missing of full RELRO (GNU_RELRO and BIND_NOW) in an ELF file."""
    headers = run(['readelf', '-lW', path])
    dynamic = run(['readelf', '-dW', path])
    missing = []
    if 'GNU_RELRO' not in headers:
        missing.append('RELRO')
    if 'BIND_NOW' not in dynamic and not re.search(r'FLAGS_1\)\s+Flags:.*\bNOW\b', dynamic):
        missing.append('BIND_NOW')
    return missing


# Strings that belong to the test suite, not to an installed criu.
TEST_HOOKS = ('zdtm', 'TEST_FAULT', 'kfdemu', 'KFDEMU', 'CRIU_TEST')


def step_contents(ctx):
    tree = os.path.join(OUT, 'contents')
    shutil.rmtree(tree, ignore_errors=True)
    for deb in ctx['debs'].values():
        run(['dpkg-deb', '-x', deb, tree])
    build_paths = [os.path.realpath(ctx['build']).encode(), b'second-build-elsewhere',
                   TOP.encode()]
    problems = []
    for dirpath, _, files in os.walk(tree):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            data = open(path, 'rb').read()
            for build_path in build_paths:
                if build_path in data:
                    problems.append('%s holds the build path %s' % (path[len(tree):],
                                                                     build_path.decode()))
    for path in ('/usr/sbin/criu', '/usr/lib/criu/amdgpu_plugin.so', SOCCR_SO):
        missing = elf_hardening(tree + path)
        if missing:
            problems.append('%s lacks %s' % (path, ' and '.join(missing)))
        text = run(['strings', '-a', tree + path])
        hooks = sorted({h for h in TEST_HOOKS if h in text})
        if hooks:
            problems.append('%s carries test hooks: %s' % (path, ', '.join(hooks)))
    soname = re.search(r'\(SONAME\)\s+Library soname: \[([^]]+)\]',
                       run(['readelf', '-dW', tree + SOCCR_SO]))
    if not soname or soname.group(1) != os.path.basename(SOCCR_SO):
        problems.append('%s has soname %s' % (SOCCR_SO, soname and soname.group(1)))
    if os.readlink(tree + '/usr/lib/libsoccr.so') != os.path.basename(SOCCR_SO):
        problems.append('/usr/lib/libsoccr.so does not link to ' + os.path.basename(SOCCR_SO))
    if problems:
        raise StepFailure('; '.join(problems))
    return ('no build path in any file; criu, the plugin and libsoccr have full RELRO and no '
            'test hook; libsoccr.so links to its soname')


def seed_dpkg_database(root, packages):
    """An empty dpkg database in root holding the machine's entries of the dependencies."""
    admin = os.path.join(root, 'var', 'lib', 'dpkg')
    for sub in ('info', 'updates', 'triggers'):
        os.makedirs(os.path.join(admin, sub))
    open(os.path.join(admin, 'available'), 'w').close()
    needed = set()
    for deb in packages:
        depends = run(['dpkg-deb', '-f', deb, 'Depends'])
        for alternative in depends.split(','):
            name = alternative.split('|')[0].split('(')[0].strip()
            if name and name not in PACKAGES:
                needed.add(name)
    entries = []
    for name in sorted(needed):
        proc = subprocess.run(['dpkg-query', '-s', name], capture_output=True, text=True)
        if proc.returncode != 0:
            raise StepFailure('dependency %s of the packages is not installed here '
                              '(scripts/install-deps.sh)' % name)
        entries.append(proc.stdout.strip() + '\n')
    with open(os.path.join(admin, 'status'), 'w') as status:
        status.write('\n'.join(entries))
    return sorted(needed)


def step_install(ctx):
    root = ctx['root']
    shutil.rmtree(root, ignore_errors=True)
    packages = [ctx['debs'][p] for p in PACKAGES]
    needed = seed_dpkg_database(root, packages)
    run(['dpkg', '--root=' + root, '--force-not-root', '-i'] + packages)
    listed = run(['dpkg', '--root=' + root, '-L'] + list(PACKAGES))
    ctx['listed'] = sorted({p for p in listed.splitlines() if p and p != '/.'})
    for path in ('/usr/sbin/criu', '/usr/bin/crit', '/usr/lib/criu/amdgpu_plugin.so', SOCCR_SO,
                 '/usr/lib/libsoccr.so', '/usr/lib/libsoccr.a', '/usr/include/criu/soccr.h'):
        if path not in ctx['listed']:
            raise StepFailure('the packages do not install %s' % path)
    return '%d paths installed into %s (dependencies seeded: %s)' % (
        len(ctx['listed']), root, ', '.join(needed))


def step_use(ctx):
    if not os.access(PROGRAM, os.X_OK):
        raise StepFailure('%s is not built (make -C test)' % PROGRAM)
    work = os.path.join(OUT, 'use')
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    proc = subprocess.run(['unshare', '--mount', '--propagation', 'private', sys.executable,
                           os.path.abspath(__file__), '--inside', ctx['root'], work],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0:
        raise StepFailure((proc.stderr.strip() or 'no output') + ' (logs in %s)' % work)
    return lines[-1] if lines else 'done'


def step_purge(ctx):
    root = ctx['root']
    run(['dpkg', '--root=' + root, '--force-not-root', '--purge'] + list(reversed(PACKAGES)))
    left = [p for p in ctx['listed'] if os.path.lexists(root + p)]
    if left:
        raise StepFailure('left after purge: ' + ', '.join(left))
    extra = [os.path.join(d, n)[len(root):] for d, dirs, files in os.walk(root)
             for n in dirs + files if not os.path.join(d, n).startswith(root + '/var')]
    if extra:
        raise StepFailure('left in the scratch root: ' + ', '.join(sorted(extra)))
    return 'all %d paths gone, nothing left outside the dpkg database' % len(ctx['listed'])


STEPS = [('man', step_man), ('build', step_build), ('version', step_version),
         ('lintian', step_lintian), ('reproducible', step_reproducible),
         ('contents', step_contents), ('install', step_install), ('use', step_use),
         ('purge', step_purge)]
# Later steps need what these made.
NEEDED_BY_OTHERS = ('build', 'install')


def main():
    if os.geteuid() != 0:
        print('pkg: needs root (dpkg --root, a mount namespace, ptrace)')
        return 1
    os.makedirs(OUT, exist_ok=True)
    ctx = {'build': os.path.join(OUT, 'build'), 'root': os.path.join(OUT, 'root')}
    passed = failed = 0
    start = time.monotonic()
    for name, step in STEPS:
        try:
            print('pkg: %s: %s' % (name, step(ctx)), flush=True)
            passed += 1
        except (StepFailure, subprocess.TimeoutExpired, OSError) as e:
            print('pkg: %s: FAIL: %s' % (name, e), flush=True)
            failed += 1
            if name in NEEDED_BY_OTHERS:
                break
    print('pkg: %d passed, %d failed (%.0f s)' % (passed, failed, time.monotonic() - start))
    return 1 if failed else 0


# ---- inside the mount namespace (step_use) ---------------------------------------------

def start_program(work):
    """The test program in work, as zdtm.py starts it; returns (pid, pidfile, output)."""
    pidfile, output = os.path.join(work, 'test.pid'), os.path.join(work, 'test.out')
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(work)
            os.dup2(os.open('/dev/null', os.O_RDONLY), 0)
            out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, 65536)
            os.execv(PROGRAM, [PROGRAM, pidfile])
        finally:
            os._exit(127)
    deadline = time.monotonic() + 10
    while not os.path.exists(pidfile):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            raise StepFailure('the test program exited before it was ready')
        if time.monotonic() > deadline:
            kill_and_reap(pid)
            raise StepFailure('the test program did not get ready')
        time.sleep(0.01)
    return pid, pidfile, output


def kill_and_reap(pid):
    """Our child (or, as subreaper, the restored program): SIGKILL it and wait for it."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def kill_children():
    """Whatever is left under us, the subreaper, after a failed restore: killed and reaped."""
    while True:
        children = []
        for tid in os.listdir('/proc/self/task'):
            with open('/proc/self/task/%s/children' % tid) as f:
                children += [int(p) for p in f.read().split()]
        if not children:
            return
        for child in children:
            kill_and_reap(child)


def wait_gone(pid, timeout=10):
    """Waits until pid (not our child any more) has exited and been reaped."""
    deadline = time.monotonic() + timeout
    while os.path.exists('/proc/%d' % pid):
        if time.monotonic() > deadline:
            raise StepFailure('process %d still exists after the dump' % pid)
        time.sleep(0.01)


def plugin_loaded(log_path):
    """criu loaded the packaged plugin from its default directory (no -L given)."""
    with open(log_path) as log:
        if not re.search(r'plugin \S+ loaded from /usr/lib/criu/amdgpu_plugin\.so', log.read()):
            raise StepFailure('criu did not load the installed plugin (%s)' % log_path)


def criu(args, work):
    return run(['/usr/sbin/criu'] + args, cwd=work)


def inside(root, work):
    """Runs as root in its own mount namespace: the packaged /usr over the machine's."""
    run(['mount', '--make-rprivate', '/'])
    run(['mount', '-t', 'overlay', 'overlay', '-o', 'lowerdir=%s/usr:/usr' % root, '/usr'])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        raise StepFailure('prctl(PR_SET_CHILD_SUBREAPER): ' + os.strerror(ctypes.get_errno()))
    check = criu(['check'], work).strip()
    if check != 'Looks good.':
        raise StepFailure('criu check said: ' + check)
    img = os.path.join(work, 'img')
    pid, pidfile, output = start_program(work)
    try:
        criu(['dump', '-t', str(pid), '-D', img, '-v4', '-o', 'dump.log'], work)
    finally:
        kill_and_reap(pid)  # dumped: killed by criu already; failed: still ours to kill
    plugin_loaded(os.path.join(img, 'dump.log'))
    wait_gone(pid)
    os.unlink(pidfile)
    try:
        criu(['restore', '-D', img, '-d', '--pidfile', pidfile, '-v4', '-o', 'restore.log'],
             work)
        with open(pidfile) as f:
            restored = int(f.read().split()[0])
        # Restored with -d: criu has exited, the program is ours (subreaper) to reap.
        os.kill(restored, signal.SIGTERM)
        _, status = os.waitpid(restored, 0)
    finally:
        kill_children()
    plugin_loaded(os.path.join(img, 'restore.log'))
    verdict = open(output).read().strip().splitlines()[-1:]
    if verdict != ['PASS'] or not os.WIFEXITED(status) or os.WEXITSTATUS(status):
        raise StepFailure('the restored program says %s (status %#x)' % (verdict, status))
    shown = run(['/usr/bin/crit', 'show', os.path.join(img, 'core-%d.img' % pid)])
    if '"magic": "CORE"' not in shown:
        raise StepFailure('/usr/bin/crit show of the core image printed no CORE image')
    tree = run(['/usr/bin/crit', 'x', img, 'ps'])
    if str(pid) not in tree:
        raise StepFailure('/usr/bin/crit x ps does not list %d' % pid)
    soccr_user(work)
    print('/usr/sbin/criu check: Looks good; dump (plugin loaded from /usr/lib/criu) and '
          'restore of %s: PASS; /usr/bin/crit show and x ps; a libsoccr program built and '
          'run' % os.path.basename(PROGRAM))


# A user of libsoccr-dev: the installed header and -lsoccr (the link to the soname), run
# with the installed libsoccr.so.1; it puts a TCP socket into repair mode and back.
SOCCR_USER = r'''
#include <criu/soccr.h>
#include <stdio.h>
#include <sys/socket.h>
int main(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct libsoccr_sk *sk = libsoccr_pause(fd);

	if (!sk)
		return 1;
	libsoccr_set_label(sk, "pkg");
	if (libsoccr_resume(sk))
		return 2;
	puts("libsoccr ok");
	return 0;
}
'''


def soccr_user(work):
    source, program = os.path.join(work, 'soccr_user.c'), os.path.join(work, 'soccr_user')
    with open(source, 'w') as f:
        f.write(SOCCR_USER)
    run(['cc', '-Wall', '-Werror', '-o', program, source, '-lsoccr'])
    # /lib is /usr/lib on Debian: the loader may name it either way.
    loaded = re.search(r'libsoccr\.so\.1 => (\S+)', run(['ldd', program]))
    if not loaded or os.path.realpath(loaded.group(1)) != SOCCR_SO:
        raise StepFailure('the libsoccr program loads %s, not %s' %
                          (loaded and loaded.group(1), SOCCR_SO))
    if run([program]).strip() != 'libsoccr ok':
        raise StepFailure('the libsoccr program failed')


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--inside':
        try:
            inside(sys.argv[2], sys.argv[3])
        except (StepFailure, OSError) as e:
            print(e, file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    sys.exit(main())
