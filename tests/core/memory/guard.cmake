# The thermal and power guard (core/memory/include/accelkit/guard.hpp): its policies on a scripted
# monitor, and during training through the CPU plugin's monitor on a fixture sysfs tree whose
# temperature the test rewrites while the trainer runs (warn, pause-and-resume, stop with a
# checkpoint and a resume).
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(guard_test SOURCES core/memory/guard_test.cpp LINK accelkit::train)
  target_compile_definitions(${guard_test_target} PRIVATE ACCELKIT_PLUGIN_OUTPUT_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${guard_test_target} accelkit-plugin-cpu)
endif()

# Through the CLI: train/bench --batch auto, report's cached decisions, the guard's exit 4.
accelkit_add_cli_test(cli_memory_test SOURCES apps/cli_memory_test.cpp)
if(TEST cli_memory_test)
  set_tests_properties(cli_memory_test PROPERTIES TIMEOUT 600)
  # monitor --all lists an AMD card from a sysfs fixture through the ROCm plugin, where it is built.
  if(TARGET accelkit-plugin-rocm)
    target_compile_definitions(${cli_memory_test_target} PRIVATE ACCELKIT_TEST_ROCM_PLUGIN=1)
    add_dependencies(${cli_memory_test_target} accelkit-plugin-rocm)
  endif()
endif()
