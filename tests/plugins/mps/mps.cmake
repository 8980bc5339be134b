# The MPS plugin's capability rules and memory figures, built from source on every OS (the
# plugin itself is built on Apple platforms only): the rules checked against recorded probe
# values in fixtures/mps, the memory figures against this LibTorch's MPS hooks.
set(ACCELKIT_MPS_DIR "${PROJECT_SOURCE_DIR}/plugins/mps")
if(NOT EXISTS "${ACCELKIT_MPS_DIR}/mps_rules.cpp")
  return()
endif()
accelkit_add_test(mps_rules_test SOURCES plugins/mps/mps_rules_test.cpp "${ACCELKIT_MPS_DIR}/mps_rules.cpp"
  LINK tomlplusplus::tomlplusplus)
target_include_directories(mps_rules_test PRIVATE "${ACCELKIT_MPS_DIR}")

accelkit_add_test(mps_memory_test SOURCES plugins/mps/mps_memory_test.cpp "${ACCELKIT_MPS_DIR}/mps_memory.cpp"
  LINK accelkit::sdk accelkit_torch)
target_include_directories(mps_memory_test PRIVATE "${ACCELKIT_MPS_DIR}")

# Where the plugin itself is not built, its entry file is compiled (never linked) against this
# LibTorch, so a change to it or to what it includes is checked on every OS.
if(NOT TARGET accelkit-plugin-mps)
  add_library(mps_plugin_compile_check OBJECT "${ACCELKIT_MPS_DIR}/mps_plugin.cpp")
  target_include_directories(mps_plugin_compile_check PRIVATE "${ACCELKIT_MPS_DIR}")
  target_link_libraries(mps_plugin_compile_check PRIVATE accelkit::sdk accelkit_torch)
  set_target_properties(mps_plugin_compile_check PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  accelkit_warnings(mps_plugin_compile_check)
  add_dependencies(mps_memory_test mps_plugin_compile_check)
endif()
