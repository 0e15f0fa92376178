#include "pg/binary_row.hpp"

#include "pg/statement.hpp"

namespace idem::pg {
namespace {

std::uint64_t read_big_endian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (const char byte : bytes) value = (value << 8) | static_cast<unsigned char>(byte);
  return value;
}

}  // namespace

bool BinaryRow::is_null(int column) const { return PQgetisnull(result_, row_, column) != 0; }

std::optional<std::string_view> BinaryRow::raw(int column, Oid type) const {
  if (column < 0 || column >= PQnfields(result_) || row_ < 0 || row_ >= PQntuples(result_)) return std::nullopt;
  if (PQftype(result_, column) != type || PQfformat(result_, column) != 1 || is_null(column)) return std::nullopt;
  const int length = PQgetlength(result_, row_, column);
  if (length < 0) return std::nullopt;
  return std::string_view(PQgetvalue(result_, row_, column), static_cast<std::size_t>(length));
}

std::optional<bool> BinaryRow::boolean(int column) const {
  const auto bytes = raw(column, oid::boolean);
  if (!bytes || bytes->size() != 1) return std::nullopt;
  return (*bytes)[0] != '\0';
}

std::optional<std::int32_t> BinaryRow::int4(int column) const {
  const auto bytes = raw(column, oid::int4);
  if (!bytes || bytes->size() != 4) return std::nullopt;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(read_big_endian(*bytes)));
}

std::optional<std::int64_t> BinaryRow::int8(int column) const {
  const auto bytes = raw(column, oid::int8);
  if (!bytes || bytes->size() != 8) return std::nullopt;
  return static_cast<std::int64_t>(read_big_endian(*bytes));
}

std::optional<std::string_view> BinaryRow::text(int column) const { return raw(column, oid::text); }

std::optional<std::string_view> BinaryRow::bytea(int column) const { return raw(column, oid::bytea); }

}  // namespace idem::pg
