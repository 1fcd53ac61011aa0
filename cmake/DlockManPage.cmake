# Run at build time (cmake -P): writes OUT, the manual page dlock(1), with
# what the built DLOCK prints for `dlock help --man`.
execute_process(COMMAND ${DLOCK} help --man OUTPUT_FILE ${OUT}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT})
  message(FATAL_ERROR "${DLOCK} help --man failed (${rc}): ${err}")
endif()
