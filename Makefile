# Top-level build: criu/criu (with the restorer blob linked in), plugins, tests.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(PREFIX)/sbin
LIBDIR := $(PREFIX)/lib
INCLUDEDIR := $(PREFIX)/include/criu
PLUGINDIR := $(LIBDIR)/criu

CC ?= gcc
LD ?= ld
OBJCOPY ?= objcopy
PROTOC_C ?= protoc-c

WARN := -Wall -Wextra -Werror
ifeq ($(ASAN),1)
SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer
endif
CFLAGS ?= -O2 -g
CFLAGS += $(WARN) $(SANITIZE) -D_GNU_SOURCE -MMD -MP -DCR_PLUGIN_DEFAULT_DIR='"$(PLUGINDIR)"'
CPPFLAGS += -Icriu/include -Icompel/include -Iimages -I.
LDLIBS := -lprotobuf-c -ldl -lpthread

PROTOS := $(wildcard images/*.proto)
PB_C := $(PROTOS:.proto=.pb-c.c)
PB_H := $(PROTOS:.proto=.pb-c.h)
PB_OBJS := $(PB_C:.c=.o)

CRIU_SRCS := $(wildcard criu/*.c compel/*.c)
CRIU_OBJS := $(CRIU_SRCS:.c=.o)

.DEFAULT_GOAL := all
# The restorer blob (criu/pie/) has its own flags and rules.
include criu/pie/Makefile.inc
# The AMDGPU plugin (plugins/amdgpu/): its own objects, linked into a .so (and a test build).
include plugins/amdgpu/Makefile.inc
# crit, the image tool (Python): targets crit, crit-install, crit-test, crit-clean.
include crit/Makefile.inc

.PHONY: all test demo bench bench-gpu fuzz install clean check-tools zdtm realapps gpu-emu
all: criu/criu $(AMDGPU_PLUGIN) crit

# What the GPU tests, the demo and the GPU benchmark run on, there being no GPU here: the
# KFD EMULATOR (test/gpu) and the AMDGPU plugin's test build. Not in `all`: never installed.
gpu-emu: $(AMDGPU_TEST_PLUGIN)
	$(MAKE) -C test/gpu all

images/%.pb-c.c images/%.pb-c.h: images/%.proto
	$(PROTOC_C) --proto_path=images --c_out=images $<

$(PB_OBJS): CFLAGS += -Wno-unused-parameter
$(CRIU_OBJS): | $(PB_H) $(RESTORER_BLOB_H)

criu/criu: $(CRIU_OBJS) $(PB_OBJS) $(RESTORER_BLOB_OBJ)
	$(CC) $(CFLAGS) -rdynamic -o $@ $^ $(LDLIBS)

-include $(CRIU_OBJS:.o=.d) $(PB_OBJS:.o=.d)

test: all gpu-emu
	$(MAKE) -C test run

demo: all gpu-emu
	./scripts/demo.sh

bench: all
	$(MAKE) -C test bench

bench-gpu: all gpu-emu
	$(MAKE) -C test/bench-gpu

# redis-server, an asyncio server and tmux dumped and restored (test/realapps/run.sh).
realapps: all
	$(MAKE) -C test realapps

# Upstream CRIU's zdtm suite (../shared/upstream-criu) against criu/criu, one flavour
# (ZDTM_FLAVOUR: h, ns, uns); ZDTM_ARGS=--list runs only test/upstream-zdtm/pass-FLAVOUR.txt.
ZDTM_FLAVOUR ?= h
zdtm: all
	test/upstream-zdtm/run.sh $(ZDTM_FLAVOUR) $(ZDTM_ARGS)

# A short libFuzzer run of every image reader target (clang; test/fuzz/README.md).
fuzz:
	$(MAKE) -C test/fuzz run

install: all crit-install
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PLUGINDIR)
	install -m 755 criu/criu $(DESTDIR)$(BINDIR)/criu
	install -m 644 criu/include/criu-plugin.h $(DESTDIR)$(INCLUDEDIR)/criu-plugin.h
	install -m 755 $(AMDGPU_PLUGIN) $(DESTDIR)$(PLUGINDIR)/amdgpu_plugin.so

clean: crit-clean
	rm -f criu/criu criu/*.o criu/*.d compel/*.o compel/*.d images/*.pb-c.* images/*.o images/*.d
	$(MAKE) -C test clean
	$(MAKE) -C test/demo clean
	$(MAKE) -C test/bench-gpu clean
	$(PIE_CLEAN)
	$(AMDGPU_CLEAN)
