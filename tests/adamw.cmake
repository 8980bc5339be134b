if(NOT TARGET accelkit_cpu_adamw)
  include(${PROJECT_SOURCE_DIR}/plugins/cpu/fused_adamw.cmake)
endif()
accelkit_add_test(adamw_test SOURCES adamw_test.cpp LINK accelkit_cpu_adamw accelkit_torch)
accelkit_add_test(master_weights_test SOURCES master_weights_test.cpp LINK accelkit_cpu_adamw accelkit_torch)
# The out-of-tree example plugin's SimpleAdamW, compiled from its source.
accelkit_add_test(example_adamw_test
  SOURCES example_adamw_test.cpp ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin/simple_adamw.cpp
  LINK accelkit::sdk accelkit_torch)
target_include_directories(example_adamw_test PRIVATE ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin)
