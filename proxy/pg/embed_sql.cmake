# Generates a C++ source holding every <SQL_DIR>/NNN_name.sql file as a raw string literal, so
# `idemproxy --migrate` (and `idemrelay --migrate`) need no files at run time. Run at build time:
#   cmake -DSQL_DIR=<dir> -DOUTPUT=<file.cpp> -DNAMESPACE=<ns> -DFUNCTION=<name> -DHEADER=<include>
#         -P embed_sql.cmake
# The source defines `std::span<const idem::pg::EmbeddedMigration> <NAMESPACE>::<FUNCTION>()`,
# declared in <HEADER>; each component names its own (store/CMakeLists.txt, relay/CMakeLists.txt).
cmake_minimum_required(VERSION 3.25)
foreach(required IN ITEMS SQL_DIR OUTPUT NAMESPACE FUNCTION HEADER)
  if(NOT ${required})
    message(FATAL_ERROR "embed_sql.cmake: SQL_DIR, OUTPUT, NAMESPACE, FUNCTION and HEADER are required")
  endif()
endforeach()

file(GLOB sql_files RELATIVE "${SQL_DIR}" "${SQL_DIR}/*.sql")
list(SORT sql_files COMPARE NATURAL)
if(NOT sql_files)
  message(FATAL_ERROR "embed_sql.cmake: no migrations in ${SQL_DIR}")
endif()

set(delimiter "idem_sql")
set(entries "")
set(seen_versions "")
foreach(name IN LISTS sql_files)
  if(NOT name MATCHES "^([0-9]+)_[A-Za-z0-9_]+\\.sql$")
    message(FATAL_ERROR "embed_sql.cmake: ${name}: migrations are named NNN_description.sql")
  endif()
  # Strip leading zeros so the number is a plain decimal literal, not octal.
  string(REGEX REPLACE "^0+([0-9])" "\\1" version "${CMAKE_MATCH_1}")
  if(version IN_LIST seen_versions)
    message(FATAL_ERROR "embed_sql.cmake: ${name}: version ${version} appears twice")
  endif()
  list(APPEND seen_versions "${version}")
  file(READ "${SQL_DIR}/${name}" body)
  string(FIND "${body}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "embed_sql.cmake: ${name} contains the literal delimiter )${delimiter}\"")
  endif()
  string(APPEND entries "    {${version}, \"${name}\", R\"${delimiter}(${body})${delimiter}\"},\n")
endforeach()

set(source "// Generated from ${SQL_DIR}/*.sql by proxy/pg/embed_sql.cmake. Do not edit.
#include \"${HEADER}\"

namespace ${NAMESPACE} {
namespace {
constexpr ::idem::pg::EmbeddedMigration kMigrations[] = {
${entries}};
}  // namespace

std::span<const ::idem::pg::EmbeddedMigration> ${FUNCTION}() { return kMigrations; }

}  // namespace ${NAMESPACE}
")

# Rewrite only on change, so an unrelated re-run does not recompile the consumer.
set(previous "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
endif()
if(NOT previous STREQUAL source)
  file(WRITE "${OUTPUT}" "${source}")
endif()
