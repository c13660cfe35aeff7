# tests/layering/check.cmake — the build enforces the stage order.
#
# Contract: run by ctest as `cmake -DBUILD_DIR=<build> -P check.cmake`.
# Builds two probe objects the same way: downward.cc (in the decide stage)
# must compile; upward.cc (in the graph stage, including decide/decide.h)
# must fail, and fail on that include. Either way round is a failed test.
foreach(probe downward upward)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target remat_layering_${probe}
                  RESULT_VARIABLE rc_${probe} OUTPUT_VARIABLE out_${probe} ERROR_VARIABLE err_${probe})
endforeach()
if(NOT rc_downward EQUAL 0)
  message(FATAL_ERROR "a declared include did not compile:\n${out_downward}${err_downward}")
endif()
if(rc_upward EQUAL 0)
  message(FATAL_ERROR "graph included decide/decide.h and the build accepted it")
endif()
if(NOT "${out_upward}${err_upward}" MATCHES "decide/decide\\.h")
  message(FATAL_ERROR "the upward probe failed for another reason:\n${out_upward}${err_upward}")
endif()
message(STATUS "layering: declared includes compile, an upward include is rejected")
