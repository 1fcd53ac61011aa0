# Installs the build at BUILD_DIR into a scratch prefix, then configures,
# builds and runs the consumer project against it. REFERENCE is the same
# program built inside the dlock tree: the installed build must register the
# same URI schemes (each backend links whole, or its scheme is dropped).
# WITH_ADAPTERS says whether dlock was built with its adapters.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DWITH_ADAPTERS=${WITH_ADAPTERS})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${REFERENCE})
string(REGEX MATCH "schemes:[^\n]*" want "${out}")
run(${WORK_DIR}/build/consumer)
string(REGEX MATCH "schemes:[^\n]*" got "${out}")
if(NOT got STREQUAL want OR want STREQUAL "")
  message(FATAL_ERROR "the installed dlock registers '${got}', the build '${want}'")
endif()
message(STATUS "${out}")
