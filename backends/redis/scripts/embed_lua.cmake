# Writes OUTPUT, a C++ source with each Lua file of INPUTS as a constant
# named k<File> (acquire.lua -> kAcquire, force_unlock.lua -> kForceUnlock),
# so that the scripts are edited as Lua and shipped inside the library.
#   cmake -DOUTPUT=file.cc -DINPUTS="a.lua;b.lua" -P embed_lua.cmake
set(text "// Generated from backends/redis/scripts/*.lua by embed_lua.cmake.\n")
string(APPEND text "#include \"redis_script_sources.h\"\n\n")
string(APPEND text "namespace dlock::redis::lua {\n")
foreach(input IN LISTS INPUTS)
  get_filename_component(stem "${input}" NAME_WE)
  string(REPLACE "_" ";" words "${stem}")
  set(name "k")
  foreach(word IN LISTS words)
    string(SUBSTRING "${word}" 0 1 first)
    string(TOUPPER "${first}" first)
    string(SUBSTRING "${word}" 1 -1 rest)
    string(APPEND name "${first}${rest}")
  endforeach()
  file(READ "${input}" body)
  string(APPEND text "extern const char ${name}[] = R\"dlocklua(${body})dlocklua\";\n")
endforeach()
string(APPEND text "}  // namespace dlock::redis::lua\n")
file(WRITE "${OUTPUT}.tmp" "${text}")
# Unchanged text leaves the file's time alone: nothing recompiles.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
