# ROCm plugin suites. rocm_rules_test and rocm_probe_test link only the LibTorch-free
# accelkit_rocm_probe and read the fixture sysfs trees in fixtures/rocm.
if(NOT TARGET accelkit_rocm_probe)
  return()
endif()

accelkit_add_test(rocm_rules_test SOURCES plugins/rocm/rocm_rules_test.cpp LINK accelkit_rocm_probe tomlplusplus::tomlplusplus)
target_compile_definitions(rocm_rules_test PRIVATE
  ACCELKIT_ROCM_PRESETS_FILE="${PROJECT_SOURCE_DIR}/plugins/rocm/presets.toml")
accelkit_add_test(rocm_probe_test SOURCES plugins/rocm/rocm_probe_test.cpp LINK accelkit_rocm_probe)

# The built module through the core's loader (handshake, factory, probe) and through the CLI.
if(TARGET accelkit AND TARGET accelkit-plugin-cpu)
  accelkit_add_test(rocm_plugin_test SOURCES plugins/rocm/rocm_plugin_test.cpp LINK accelkit::core)
  target_compile_definitions(rocm_plugin_test PRIVATE
    ACCELKIT_ROCM_PLUGIN_PATH="$<TARGET_FILE:accelkit-plugin-rocm>"
    ACCELKIT_CPU_PLUGIN_PATH="$<TARGET_FILE:accelkit-plugin-cpu>"
    ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>")
  add_dependencies(rocm_plugin_test accelkit accelkit-plugin-cpu accelkit-plugin-rocm)
endif()
