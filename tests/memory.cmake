# Memory through the contract: accelkit::MemoryScope over scripted devices (nesting, no reset,
# no memory) and over the CPU plugin's /proc readings on this very process.
if(TARGET accelkit_cpu_probe)
  accelkit_add_test(memory_scope_test SOURCES memory_scope_test.cpp LINK accelkit_core accelkit_cpu_probe)
  target_include_directories(${memory_scope_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/plugins/cpu")
endif()
