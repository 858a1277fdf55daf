# make run: the main job on the bundled demo workload. Until `record` exists
# it shows what there is.
.PHONY: run-demo
run-demo: $(BUILD)/stackprobe
	$(Q)$(BUILD)/stackprobe --help
