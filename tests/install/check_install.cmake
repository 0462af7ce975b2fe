# Installs the build in MIXP_BUILD_DIR to a scratch prefix, then configures, builds and runs
# the examples against it with find_package(mixp).
file(REMOVE_RECURSE ${MIXP_WORK_DIR})
set(prefix ${MIXP_WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${MIXP_BUILD_DIR} --prefix ${prefix})
foreach(f include/mixp/mixp.h lib/cmake/mixp/mixpConfig.cmake bin/mixp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install is missing ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${MIXP_EXAMPLES_DIR} -B ${MIXP_WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${MIXP_BUILD_TYPE})
run(${CMAKE_COMMAND} --build ${MIXP_WORK_DIR}/build -j 2)
run(${MIXP_WORK_DIR}/build/formats_example)
message(STATUS "formats_example printed:\n${last_output}")
if(NOT last_output MATCHES "bf16\\(3.14159\\) = 3.140625")
  message(FATAL_ERROR "formats_example printed the wrong result")
endif()
file(REMOVE_RECURSE ${MIXP_WORK_DIR})
