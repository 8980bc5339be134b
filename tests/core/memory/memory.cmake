# Memory through the contract: accelkit::MemoryScope over scripted devices (nesting, no reset,
# no memory) and over the CPU plugin's /proc readings on this very process.
if(TARGET accelkit_cpu_probe)
  accelkit_add_test(memory_scope_test SOURCES core/memory/memory_scope_test.cpp LINK accelkit_core accelkit_cpu_probe)
  target_include_directories(${memory_scope_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/plugins/cpu")
endif()

# The batch-size finder: the search on scripted trials (out of memory above N samples), the fit,
# the accumulation steps; Runtime::find_batch_size on the CPU on a real model with a small budget.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(batch_finder_test SOURCES core/memory/batch_finder_test.cpp LINK accelkit_core)
  target_compile_definitions(${batch_finder_test_target} PRIVATE ACCELKIT_PLUGIN_OUTPUT_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${batch_finder_test_target} accelkit-plugin-cpu)
endif()
