accelkit_add_test(core_test SOURCES core/core_test.cpp LINK accelkit_core GROUP host)

# Every LibTorch version condition lives in sdk/include/accelkit/sdk/torch_compat*.hpp.
add_test(NAME compat_guard COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/core/compat_guard_test.sh" "${PROJECT_SOURCE_DIR}")

# The layers' boundaries: plugins include the SDK only, the core no application header, no
# include cycle among the core's headers (docs/architecture.md).
add_test(NAME layout_guard COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/core/layout_guard_test.sh" "${PROJECT_SOURCE_DIR}")
