# The device-generic plugin (torch) through the PrivateUse1 device that the hostmem reference
# plugin registers: a process of its own (LibTorch keeps one PrivateUse1 backend per process).
if(NOT TARGET accelkit-plugin-torch OR NOT TARGET accelkit-plugin-hostmem OR NOT TARGET accelkit-plugin-cpu
   OR NOT TARGET accelkit)
  return()
endif()
accelkit_add_test(torch_plugin_test SOURCES plugins/torch/torch_plugin_test.cpp LINK accelkit::core accelkit::conformance)
target_compile_definitions(torch_plugin_test PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>" ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(torch_plugin_test accelkit accelkit-plugin-scanner accelkit-plugin-cpu accelkit-plugin-hostmem
  accelkit-plugin-torch)
set_tests_properties(torch_plugin_test PROPERTIES TIMEOUT 600)
