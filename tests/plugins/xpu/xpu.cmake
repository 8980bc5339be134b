# xpu plugin suites. The plugin dlopens Level Zero's loader; the suites point it at
# accelkit_fake_level_zero (libfake_ze_loader.so), a stand-in configured per case by the file named
# in ACCELKIT_FAKE_ZE (format: the comment at the top of fake_level_zero.cpp), and read the fixture
# sysfs trees and Level Zero configurations in fixtures/xpu.
if(NOT TARGET accelkit_xpu_probe)
  return()
endif()

add_library(accelkit_fake_level_zero SHARED plugins/xpu/fake_level_zero.cpp)
target_include_directories(accelkit_fake_level_zero PRIVATE ${PROJECT_SOURCE_DIR}/plugins/xpu)
# Only the Level Zero entry points and the two accelkit_fake_ze_* hooks are exported.
set_target_properties(accelkit_fake_level_zero PROPERTIES
  OUTPUT_NAME fake_ze_loader
  POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
accelkit_warnings(accelkit_fake_level_zero)

# Suites: below
accelkit_add_test(xpu_probe_test SOURCES plugins/xpu/xpu_probe_test.cpp LINK accelkit_xpu_probe ${CMAKE_DL_LIBS})
target_compile_definitions(xpu_probe_test PRIVATE
  ACCELKIT_FAKE_ZE_PATH="$<TARGET_FILE:accelkit_fake_level_zero>")
add_dependencies(xpu_probe_test accelkit_fake_level_zero)

# The built module through the core's loader (handshake, factory, probe) and through the CLI.
if(TARGET accelkit AND TARGET accelkit-plugin-cpu AND TARGET accelkit-plugin-xpu)
  accelkit_add_test(xpu_plugin_test SOURCES plugins/xpu/xpu_plugin_test.cpp LINK accelkit::core)
  target_compile_definitions(xpu_plugin_test PRIVATE
    ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
    ACCELKIT_FAKE_ZE_PATH="$<TARGET_FILE:accelkit_fake_level_zero>"
    ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>")
  add_dependencies(xpu_plugin_test accelkit accelkit-plugin-cpu accelkit-plugin-xpu accelkit_fake_level_zero)
endif()
