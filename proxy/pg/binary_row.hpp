#pragma once
// Reads one row of a result fetched in binary format (resultFormat = 1). Every getter checks the
// column's type OID, format and length; any mismatch (or NULL) yields nullopt, which callers
// treat as an internal error: it means the SQL and the decoder disagree.
#include <libpq-fe.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace idem::pg {

class BinaryRow {
 public:
  BinaryRow(const PGresult* result, int row) : result_(result), row_(row) {}

  bool is_null(int column) const;
  std::optional<bool> boolean(int column) const;
  std::optional<std::int32_t> int4(int column) const;
  std::optional<std::int64_t> int8(int column) const;
  std::optional<std::string_view> text(int column) const;   // raw bytes, no terminator
  std::optional<std::string_view> bytea(int column) const;  // raw bytes

 private:
  // The column's bytes when its type is `type`, its format binary and its value not NULL.
  std::optional<std::string_view> raw(int column, Oid type) const;

  const PGresult* result_;
  int row_;
};

}  // namespace idem::pg
