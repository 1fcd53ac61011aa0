# What check.cmake and check_deb.cmake share: running a step, and building
# and running the consumer project against a prefix where dlock is
# installed. SOURCE_DIR is this project; REFERENCE the same program built
# inside the dlock tree: the installed build must register the same URI
# schemes (each backend links whole, or its scheme is dropped).
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(build_and_run_consumer prefix build_dir)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build_dir}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DWITH_ADAPTERS=${WITH_ADAPTERS})
  run(${CMAKE_COMMAND} --build ${build_dir})
  run(${REFERENCE})
  string(REGEX MATCH "schemes:[^\n]*" want "${out}")
  run(${build_dir}/consumer)
  string(REGEX MATCH "schemes:[^\n]*" got "${out}")
  if(NOT got STREQUAL want OR want STREQUAL "")
    message(FATAL_ERROR "the installed dlock registers '${got}', the build '${want}'")
  endif()
  message(STATUS "${out}")
endfunction()
