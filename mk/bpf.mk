# bpf/: the eBPF companion (docs/PAUSE.md). libbpf-bootstrap pattern rules:
#   bpf/<name>.bpf.c --clang -target bpf--> build/bpf/<name>.bpf.o
#                    --bpftool gen skeleton--> build/<name>.skel.h
# The skeleton embeds the object, so the library and the CLI carry the BPF
# programs with them; objects that include it wait for it via GEN_HDRS.
#
# vmlinux.h comes from vmlinux/<arch>/vmlinux.h (generated with bpftool from
# /sys/kernel/btf/vmlinux and committed), so the build never depends on the
# build host's kernel. CO-RE relocates field offsets at load time.
#
# arm64: no arm64 kernel BTF was available to generate vmlinux/arm64/ here.
# The build goes on WITHOUT the companion (userspace/pause/pause.c compiled with
# -DSPROBE_NO_BPF: sprobe_pause__new() fails with ENOTSUP and says why) and
# make prints how to add it. Once vmlinux/arm64/vmlinux.h exists the
# companion is built on arm64 like on x86.

BPF_VMLINUX := vmlinux/$(ARCH)/vmlinux.h
BPF_SRCS    := $(sort $(wildcard bpf/*.bpf.c))
BPF_OBJS    := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS   := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
BPF_CFLAGS  := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	       -Werror=undef -I$(dir $(BPF_VMLINUX)) -Ibpf

ifneq ($(wildcard $(BPF_VMLINUX)),)

GEN_HDRS += $(BPF_SKELS)
# Keep the object and skeleton: they are intermediates of a pattern chain.
.SECONDARY: $(BPF_OBJS) $(BPF_SKELS)

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c bpf/%.h $(BPF_VMLINUX) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# `name <x>_bpf` gives struct <x>_bpf and <x>_bpf__open() etc.
$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

else

$(warning stackprobe: no $(BPF_VMLINUX): building WITHOUT the eBPF companion \
(stackprobe pause / record --bpf will report ENOTSUP). To add it, on a $(ARCH) \
machine with kernel BTF run: mkdir -p $(dir $(BPF_VMLINUX)) && bpftool btf dump \
file /sys/kernel/btf/vmlinux format c > $(BPF_VMLINUX))
$(BUILD)/obj/userspace/pause/pause.o: OBJ_CFLAGS += -DSPROBE_NO_BPF

endif

# Regenerate the committed vmlinux.h for this machine's architecture.
.PHONY: vmlinux
vmlinux:
	$(Q)mkdir -p $(dir $(BPF_VMLINUX))
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $(BPF_VMLINUX)
