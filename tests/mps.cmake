# The MPS plugin's capability rules, built from source on every OS (the plugin itself is built
# on Apple platforms only) and checked against recorded probe values in fixtures/mps.
set(ACCELKIT_MPS_DIR "${PROJECT_SOURCE_DIR}/plugins/mps")
if(NOT EXISTS "${ACCELKIT_MPS_DIR}/mps_rules.cpp")
  return()
endif()
accelkit_add_test(mps_rules_test SOURCES mps_rules_test.cpp "${ACCELKIT_MPS_DIR}/mps_rules.cpp"
  LINK tomlplusplus::tomlplusplus)
target_include_directories(mps_rules_test PRIVATE "${ACCELKIT_MPS_DIR}")
