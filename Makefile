# memleak-ai: build, test, demo and benchmark entry points.
OUTPUT := build
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= gcc
ARCH := x86
PREFIX ?= /usr/local
VERSION := 0.1.0

# vmlinux/vmlinux.h and the BPF unwinder are x86-64's: refuse other machines before anything is built.
ifneq ($(shell uname -m),x86_64)
$(error memleak-ai builds on x86_64 only (vmlinux.h and the unwinder are x86-64's); this machine is $(shell uname -m))
endif

CFLAGS ?= -g -O2
CFLAGS += -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -DML_VERSION='"$(VERSION)"'
# `make test` builds with WERROR=1: a warning fails the tests, not a user's build with another compiler.
ifeq ($(WERROR),1)
CFLAGS += -Werror
endif
CPPFLAGS += -I$(OUTPUT) -Iuser -Ibpf -MMD -MP
LDLIBS += -lbpf -lelf -ldw -lz -lstdc++ -lm -lprotobuf-c -lmicrohttpd -lcurl -ljansson -lpthread
# clang's own include paths, so BPF code sees the same system headers without the kernel's
CLANG_BPF_SYS_INCLUDES ?= $(shell $(CLANG) -v -E - </dev/null 2>&1 | sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# user/ by pipeline stage: lib, then attach, symbolize, unwind, python, collect, judge, report, diff, session.
USER_SRCS := $(wildcard user/*/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/%.o,$(USER_SRCS))

.DELETE_ON_ERROR:
.PHONY: all deps venv test unit fuzz demo bench install clean distclean format

all: memleak-ai

$(OUTPUT):
	$(Q)mkdir -p $@

# The BPF side is several units (bpf/*.bpf.c), linked into one object: one skeleton, maps and programs by name.
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_TMP_OBJS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.tmp.bpf.o,$(BPF_SRCS))

$(OUTPUT)/%.tmp.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.bpf.h) bpf/memleak.h vmlinux/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -Wall -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Ibpf $(CLANG_BPF_SYS_INCLUDES) \
		-c $< -o $@

$(OUTPUT)/memleak.bpf.o: $(BPF_TMP_OBJS)
	$(call msg,BPF-LINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUTPUT)/memleak.skel.h: $(OUTPUT)/memleak.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memleak_bpf > $@

$(USER_OBJS) $(OUTPUT)/main.o: $(OUTPUT)/memleak.skel.h $(OUTPUT)/profile.pb-c.h

$(OUTPUT)/profile.pb-c.c $(OUTPUT)/profile.pb-c.h &: proto/profile.proto | $(OUTPUT)
	$(call msg,PROTOC-C,$@)
	$(Q)protoc-c --proto_path=proto --c_out=$(OUTPUT) $<

$(OUTPUT)/profile.pb-c.o: $(OUTPUT)/profile.pb-c.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

$(OUTPUT)/%.o: user/%.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The HTML report inlines Debian's Chart.js (libjs-chart.js) and its own flame graph at build time. The file is
# a prerequisite only when present, so that a missing package gets gen-html-assets.py's error naming it.
HTML_CHARTJS := /usr/share/javascript/chart.js/chart.min.js

$(OUTPUT)/html_assets.c: scripts/gen-html-assets.py scripts/html/report.html scripts/html/render.js \
			 scripts/html/flame.js $(wildcard $(HTML_CHARTJS)) | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)python3 scripts/gen-html-assets.py $@ $(HTML_CHARTJS)

$(OUTPUT)/html_assets.o: $(OUTPUT)/html_assets.c
	$(call msg,CC,$@)
	$(Q)$(CC) -c $< -o $@

memleak-ai: $(OUTPUT)/main.o $(USER_OBJS) $(OUTPUT)/profile.pb-c.o $(OUTPUT)/html_assets.o
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

-include $(wildcard $(OUTPUT)/*.d $(OUTPUT)/*/*.d)

deps:
	$(Q)scripts/install-deps.sh

# One virtual environment per CPython (build/venv/3.X/) with the pinned PyPI torch of tests/requirements.txt.
venv: deps
	$(Q)scripts/make-venv.sh

test: deps venv
	$(Q)$(MAKE) --no-print-directory -j$$(nproc) all WERROR=1
	$(Q)scripts/run-tests.sh

unit: all
	$(Q)scripts/run-tests.sh --unit-only

# The fuzzers alone, FUZZ_SECONDS each (default 600; `make test` gives them 5).
fuzz: all
	$(Q)FUZZ_SECONDS=$${FUZZ_SECONDS:-600} scripts/run-tests.sh --fuzz-only

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/demo.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/bench.sh $(BENCH)

install: memleak-ai
	install -D -m 0755 memleak-ai $(DESTDIR)$(PREFIX)/sbin/memleak-ai
	install -D -m 0644 docs/memleak-ai.8 $(DESTDIR)$(PREFIX)/share/man/man8/memleak-ai.8

# Every C and C++ file of ours (vmlinux.h is generated); `make test` checks them with --dry-run -Werror.
C_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp' ':!vmlinux/*' 2>/dev/null)

format:
	clang-format -i $(C_FILES)

# The venvs stay (gigabytes of wheels to install again); distclean takes them too.
clean:
	rm -rf $(filter-out $(OUTPUT)/venv,$(wildcard $(OUTPUT)/*)) memleak-ai

distclean:
	rm -rf $(OUTPUT) memleak-ai
