# Generates a C++ source holding every config/sql/NNN_name.sql file as a raw string literal, so
# `idemproxy --migrate` needs no files at run time. Run at build time:
#   cmake -DSQL_DIR=<dir> -DOUTPUT=<file.cpp> -P embed_sql.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SQL_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_sql.cmake: SQL_DIR and OUTPUT are required")
endif()

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

set(source "// Generated from config/sql/*.sql by proxy/store/pg/embed_sql.cmake. Do not edit.
#include \"store/pg/embedded_migrations.hpp\"

namespace idem::store::pg {
namespace {
constexpr EmbeddedMigration kMigrations[] = {
${entries}};
}  // namespace

std::span<const EmbeddedMigration> embedded_migrations() { return kMigrations; }

}  // namespace idem::store::pg
")

# Rewrite only on change, so an unrelated re-run does not recompile the consumer.
set(previous "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
endif()
if(NOT previous STREQUAL source)
  file(WRITE "${OUTPUT}" "${source}")
endif()
