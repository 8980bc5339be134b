# CPU plugin suites. All but cpu_plugin_test and cpu_blas_test link only the LibTorch-free
# accelkit_cpu_probe.
if(NOT TARGET accelkit_cpu_probe)
  return()
endif()

accelkit_add_test(cpu_isa_test SOURCES plugins/cpu/cpu_isa_test.cpp LINK accelkit_cpu_probe)
accelkit_add_test(cpu_parse_test SOURCES plugins/cpu/cpu_parse_test.cpp LINK accelkit_cpu_probe)
accelkit_add_test(cpu_probe_test SOURCES plugins/cpu/cpu_probe_test.cpp LINK accelkit_cpu_probe)
accelkit_add_test(cpu_monitor_test SOURCES plugins/cpu/cpu_monitor_test.cpp LINK accelkit_cpu_probe)
accelkit_add_test(cpu_precision_test SOURCES plugins/cpu/cpu_precision_test.cpp LINK accelkit_cpu_probe)
# OpenBLAS kernel sets: the choice, and the live switch checked on LibTorch matmuls.
accelkit_add_test(cpu_blas_test SOURCES plugins/cpu/cpu_blas_test.cpp LINK accelkit_cpu_probe accelkit_torch GROUP runtime)

# The built module, dlopened as the host does; LibTorch only for headers and the ABI flags.
accelkit_add_test(cpu_plugin_test SOURCES plugins/cpu/cpu_plugin_test.cpp
  LINK accelkit::sdk accelkit_torch ${CMAKE_DL_LIBS} GROUP runtime)
target_compile_definitions(${cpu_plugin_test_target} PRIVATE
  ACCELKIT_CPU_PLUGIN_PATH="$<TARGET_FILE:accelkit-plugin-cpu>")
add_dependencies(${cpu_plugin_test_target} accelkit-plugin-cpu)
