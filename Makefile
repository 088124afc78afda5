# Top-level build: criu/criu (with the restorer blob and libsoccr linked in), libsoccr,
# plugins, tests.
# Where `make install` puts things (DESTDIR is prepended to each, for packaging).
PREFIX ?= /usr/local
DESTDIR ?=
SBINDIR ?= $(PREFIX)/sbin
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PLUGINDIR ?= $(LIBDIR)/criu

CC ?= gcc
LD ?= ld
OBJCOPY ?= objcopy
PROTOC_C ?= protoc-c
PROTOC ?= protoc
ASCIIDOCTOR ?= asciidoctor

# Before anything is built (and before the pkg-config calls below): are the tools and
# libraries the goals need installed? If not, one line naming them and the command that
# installs them (scripts/check-deps.sh), instead of the first missing tool's error halfway
# through. Each goal asks for its groups; the cleaning goals need nothing. The sub-makes of
# a checked make (make test's, the Debian build's) are not checked again.
DEPS_GOALS := $(or $(MAKECMDGOALS),all)
NODEPS_GOALS := clean pkg-clean man-clean crit-clean uninstall crit-uninstall check-deps
DEPS_GROUPS := $(if $(filter-out $(NODEPS_GOALS),$(DEPS_GOALS)),build) \
	$(if $(filter install man deb test,$(DEPS_GOALS)),man) \
	$(if $(filter crit-test demo test realapps zdtm,$(DEPS_GOALS)),crit) \
	$(if $(filter fuzz test,$(DEPS_GOALS)),fuzz) \
	$(if $(filter realapps test,$(DEPS_GOALS)),apps) \
	$(if $(filter runtimes test,$(DEPS_GOALS)),runtimes) \
	$(if $(filter test,$(DEPS_GOALS)),test) \
	$(if $(filter zdtm test,$(DEPS_GOALS)),upstream) \
	$(if $(filter deb test,$(DEPS_GOALS)),deb)
DEPS_ENV = CC='$(CC)' LD='$(LD)' OBJCOPY='$(OBJCOPY)' PROTOC_C='$(PROTOC_C)' \
	PROTOC='$(PROTOC)' ASCIIDOCTOR='$(ASCIIDOCTOR)'
ifeq ($(CRIU_DEPS_CHECKED),)
ifneq ($(strip $(DEPS_GROUPS)),)
DEPS_MISSING := $(shell $(DEPS_ENV) scripts/check-deps.sh $(DEPS_GROUPS))
ifneq ($(DEPS_MISSING),)
$(error $(DEPS_MISSING))
endif
export CRIU_DEPS_CHECKED := 1
endif
endif

WARN := -Wall -Wextra -Werror
ifeq ($(ASAN),1)
SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer
endif
CFLAGS ?= -O2 -g
# The distribution's CPPFLAGS alone, for code that must not see criu's headers (lib/c).
DIST_CPPFLAGS := $(CPPFLAGS)
# A distribution's CFLAGS, CPPFLAGS and LDFLAGS (environment or command line) come first;
# the project's own are appended to them, even to a command-line value (override), so
# -Werror and the include paths always hold. The build directory is mapped to "." in
# debug info and __FILE__: two builds of one tree in two places give the same bytes.
override CFLAGS += $(WARN) $(SANITIZE) -D_GNU_SOURCE -MMD -MP -ffile-prefix-map=$(CURDIR)=.
override CFLAGS += -DCR_PLUGIN_DEFAULT_DIR='"$(PLUGINDIR)"'
override CPPFLAGS += -Icriu/include -Icompel/include -Iimages -I.
# Full RELRO: the GOT is read-only once criu (or a plugin) is loaded.
override LDFLAGS += -Wl,-z,relro,-z,now
LDLIBS := -lprotobuf-c -ldl -lpthread

PROTOS := $(wildcard images/*.proto)
PB_C := $(PROTOS:.proto=.pb-c.c)
PB_H := $(PROTOS:.proto=.pb-c.h)
PB_OBJS := $(PB_C:.c=.o)

# criu/'s layers (Documentation/design.md §2.1), each a folder: a file calls only into its
# own folder and those below it (scripts/check-layers.py).
CRIU_LAYERS := command pipelines kinds base
CRIU_SRCS := $(wildcard $(CRIU_LAYERS:%=criu/%/*.c) compel/*.c)
CRIU_OBJS := $(CRIU_SRCS:.c=.o)

.DEFAULT_GOAL := all
# The restorer blob (criu/pie/) has its own flags and rules.
include criu/pie/Makefile.inc
# The parasite blob (compel/parasite/), run inside a dumped task: its own flags and rules.
include compel/parasite/Makefile.inc
# The AMDGPU plugin (plugins/amdgpu/): its own objects, linked into a .so (and a test build).
include plugins/amdgpu/Makefile.inc
# libsoccr, TCP connection repair (soccr/): a static library for criu, a shared one to install.
include soccr/Makefile.inc
# crit, the image tool (Python): targets crit, crit-install, crit-test, crit-clean.
include crit/Makefile.inc
# Man pages (asciidoctor): targets man, man-clean.
include Documentation/Makefile.inc
# libcriu (lib/c/): targets libcriu, libcriu-install, libcriu-uninstall, libcriu-clean.
include lib/c/Makefile.inc

.PHONY: all test demo bench bench-gpu fuzz install clean check-deps zdtm realapps runtimes gpu-emu
.PHONY: uninstall deb soccr-test
all: criu/criu $(SOCCR_SO) $(AMDGPU_PLUGIN) crit libcriu

# Everything make, make test and make deb need (scripts/install-deps.sh installs it).
check-deps:
	@$(DEPS_ENV) scripts/check-deps.sh all && echo "check-deps: all present"

# What the GPU tests, the demo and the GPU benchmark run on, there being no GPU here: the
# KFD EMULATOR (test/gpu) and the AMDGPU plugin's test build. Not in `all`: never installed.
gpu-emu: $(AMDGPU_TEST_PLUGIN)
	$(MAKE) -C test/gpu all

images/%.pb-c.c images/%.pb-c.h: images/%.proto
	$(PROTOC_C) --proto_path=images --c_out=images $<

$(PB_OBJS): override CFLAGS += -Wno-unused-parameter
$(CRIU_OBJS): | $(PB_H) $(RESTORER_BLOB_H)

criu/criu: $(CRIU_OBJS) $(PB_OBJS) $(RESTORER_BLOB_OBJ) $(PARASITE_BLOB_OBJ) $(SOCCR_A)
	$(CC) $(CFLAGS) $(LDFLAGS) -rdynamic -o $@ $^ $(LDLIBS)

-include $(CRIU_OBJS:.o=.d) $(PB_OBJS:.o=.d)

# The plugin directory is compiled into criu/base/plugin.o: `make install PREFIX=/usr` after a
# plain `make` rebuilds it for the new directory instead of installing a criu that looks
# in the old one.
criu/plugindir.stamp: FORCE
	@echo '$(PLUGINDIR)' | cmp -s - $@ || echo '$(PLUGINDIR)' >$@
criu/base/plugin.o: criu/plugindir.stamp
.PHONY: FORCE

test: all gpu-emu
	$(MAKE) -C test run

# libsoccr's own test: connections on 127.0.0.1 and ::1 saved and restored (root).
soccr-test: $(SOCCR_TEST)
	$(SOCCR_TEST)

demo: all gpu-emu
	./scripts/demo.sh

bench: all
	$(MAKE) -C test bench

bench-gpu: all gpu-emu
	$(MAKE) -C test/bench-gpu

# redis-server, an asyncio server and tmux dumped and restored (test/realapps/run.sh).
realapps: all
	$(MAKE) -C test realapps

# Container runtimes checkpointing through this criu (test/runtimes/: LXC, runc, containerd,
# podman).
runtimes: all
	$(MAKE) -C test runtimes

# Upstream CRIU's zdtm suite (../shared/upstream-criu) against criu/criu, one flavour
# (ZDTM_FLAVOUR: h, ns, uns); ZDTM_ARGS=--list runs only test/upstream-zdtm/pass-FLAVOUR.txt.
ZDTM_FLAVOUR ?= h
zdtm: all
	test/upstream-zdtm/run.sh $(ZDTM_FLAVOUR) $(ZDTM_ARGS)

# libcriu's tests (test/libcriu/): a zdtm program dumped and restored through lib/c, and
# CRIU's own libcriu tests built against it.
.PHONY: libcriu-test
libcriu-test: all
	$(MAKE) -C test libcriu

# A short libFuzzer run of every image reader target (clang; test/fuzz/README.md).
fuzz:
	$(MAKE) -C test/fuzz run

# criu, crit, the plugin directory with the AMDGPU plugin, the plugin API header,
# libsoccr (the shared library with its soname link, the static one, its header beside the
# plugin's), libcriu (lib/c/Makefile.inc) and the man pages. Not stripped: a packager strips
# (and keeps the debug symbols) itself.
install: all man crit-install libcriu-install
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(INCLUDEDIR)/criu $(DESTDIR)$(PLUGINDIR) \
		$(DESTDIR)$(LIBDIR)
	install -m 755 criu/criu $(DESTDIR)$(SBINDIR)/criu
	install -m 644 criu/include/criu-plugin.h $(DESTDIR)$(INCLUDEDIR)/criu/criu-plugin.h
	install -m 644 soccr/soccr.h $(DESTDIR)$(INCLUDEDIR)/criu/soccr.h
	install -m 644 $(SOCCR_SO) $(DESTDIR)$(LIBDIR)/$(SOCCR_SONAME)
	ln -sf $(SOCCR_SONAME) $(DESTDIR)$(LIBDIR)/libsoccr.so
	install -m 644 $(SOCCR_A) $(DESTDIR)$(LIBDIR)/libsoccr.a
	install -m 755 $(AMDGPU_PLUGIN) $(DESTDIR)$(PLUGINDIR)/amdgpu_plugin.so
	for page in $(notdir $(MAN_PAGES)); do \
		install -d $(DESTDIR)$(MANDIR)/man$${page##*.} && \
		install -m 644 Documentation/$$page $(DESTDIR)$(MANDIR)/man$${page##*.}/$$page || exit 1; \
	done

uninstall: crit-uninstall libcriu-uninstall
	rm -f $(DESTDIR)$(SBINDIR)/criu $(DESTDIR)$(INCLUDEDIR)/criu/criu-plugin.h
	rm -f $(DESTDIR)$(INCLUDEDIR)/criu/soccr.h $(DESTDIR)$(LIBDIR)/$(SOCCR_SONAME)
	rm -f $(DESTDIR)$(LIBDIR)/libsoccr.so $(DESTDIR)$(LIBDIR)/libsoccr.a
	rm -f $(DESTDIR)$(PLUGINDIR)/amdgpu_plugin.so
	for page in $(notdir $(MAN_PAGES)); do rm -f $(DESTDIR)$(MANDIR)/man$${page##*.}/$$page; done
	for dir in $(DESTDIR)$(INCLUDEDIR)/criu $(DESTDIR)$(PLUGINDIR); do \
		[ ! -d $$dir ] || rmdir --ignore-fail-on-non-empty $$dir; done

# The Debian packages (debian/), built by dpkg-buildpackage from a copy of the tree in
# DEB_DIR, where the .debs land (scripts/build-deb.sh); then lintian's verdict on them.
DEB_DIR ?= out/deb
deb:
	scripts/build-deb.sh $(DEB_DIR)
	lintian --info $(DEB_DIR)/*.changes

# What the targets above leave besides the build: `make clean` removes it too.
.PHONY: pkg-clean
pkg-clean:
	rm -rf out criu/plugindir.stamp
clean: man-clean pkg-clean

clean: crit-clean libcriu-clean
	rm -f criu/criu $(CRIU_LAYERS:%=criu/%/*.[od]) compel/*.o compel/*.d images/*.pb-c.* images/*.o images/*.d
	$(MAKE) -C test clean
	$(MAKE) -C test/demo clean
	$(MAKE) -C test/bench-gpu clean
	$(PIE_CLEAN)
	$(PARASITE_CLEAN)
	$(AMDGPU_CLEAN)
	$(SOCCR_CLEAN)
