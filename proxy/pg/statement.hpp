#pragma once
// One SQL statement with its parameters, ready for PQsendQueryParams or PQsendQueryPrepared. Every
// parameter travels in binary format (text and bytea as raw bytes, so a NUL byte can never
// truncate a value), with its type OID stated so the server never has to guess.
#include <libpq-fe.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::pg {

// Type OIDs of the built-in types Param sends (pg_type.dat; fixed since forever).
namespace oid {
inline constexpr Oid boolean = 16;
inline constexpr Oid bytea = 17;
inline constexpr Oid int8 = 20;
inline constexpr Oid int4 = 23;
inline constexpr Oid text = 25;
inline constexpr Oid int4_array = 1007;
inline constexpr Oid text_array = 1009;
inline constexpr Oid int8_array = 1016;
}  // namespace oid

class Param {
 public:
  static Param text(std::string value);
  static Param bytea(std::string value);
  static Param int8(std::int64_t value);
  static Param int4(std::int32_t value);
  static Param boolean(bool value);
  static Param null(Oid type);
  // One-dimensional arrays without NULL elements (for `= ANY($n)` and `unnest($n, ...)`), so a
  // whole batch travels in one statement.
  static Param int8_array(std::span<const std::int64_t> values);
  static Param int4_array(std::span<const std::int32_t> values);
  static Param text_array(std::span<const std::string> values);

  Oid type() const { return type_; }
  bool is_null() const { return is_null_; }
  const std::string& bytes() const { return bytes_; }  // binary wire representation

 private:
  Param(Oid type, std::string bytes, bool is_null) : type_(type), bytes_(std::move(bytes)), is_null_(is_null) {}
  Oid type_;
  std::string bytes_;
  bool is_null_;
};

struct Statement {
  std::string_view name;  // for logs (e.g. "claim", "complete")
  // A constant of the caller's SQL (static storage duration): with prepared statements its
  // address identifies the prepared statement on a connection (prepared_statements.hpp).
  const char* sql = nullptr;
  std::vector<Param> params;
};

}  // namespace idem::pg
