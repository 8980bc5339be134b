# Operation routing: the pure resolution, the [routing] table's validation, run_routed on the
# CPU, and Runtime::route with the CPU plugin.
accelkit_add_test(routing_test SOURCES core/settings/routing_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${routing_test_target} PRIVATE
  ACCELKIT_ROUTING_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures/routing")
if(TARGET accelkit-plugin-cpu)
  target_compile_definitions(${routing_test_target} PRIVATE ACCELKIT_CPU_PLUGIN_PATH="$<TARGET_FILE:accelkit-plugin-cpu>")
  add_dependencies(${routing_test_target} accelkit-plugin-cpu)
endif()
