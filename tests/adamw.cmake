if(NOT TARGET accelkit_cpu_adamw)
  include(${PROJECT_SOURCE_DIR}/plugins/cpu/fused_adamw.cmake)
endif()
accelkit_add_test(adamw_test SOURCES adamw_test.cpp LINK accelkit_cpu_adamw accelkit_torch)
