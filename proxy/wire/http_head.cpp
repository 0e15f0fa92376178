#include "wire/http_head.hpp"

#include <cstring>

namespace idem::wire {
namespace beast_http = boost::beast::http;
namespace {

// The head is measured first, then copied into place: one resize of `out` (whose capacity is kept)
// instead of an append, with its capacity check and call, for each of a head's pieces.
constexpr std::size_t kVersionSize = 8;  // "HTTP/x.y"

void put(char*& at, boost::beast::string_view text) {
  if (text.empty()) return;
  std::memcpy(at, text.data(), text.size());
  at += text.size();
}

void put(char*& at, char a, char b) {
  at[0] = a;
  at[1] = b;
  at += 2;
}

// "HTTP/x.y", the digits as Beast writes them (version / 10, version % 10).
void put_version(char*& at, unsigned version) {
  put(at, "HTTP/");
  put(at, static_cast<char>('0' + version / 10), '.');
  *at++ = static_cast<char>('0' + version % 10);
}

// Name, value and Beast's enum of a FieldView, or of a Beast field.
boost::beast::string_view name_of(const FieldView& field) { return field.name; }
boost::beast::string_view value_of(const FieldView& field) { return field.value; }
beast_http::field id_of(const FieldView& field) { return field.id; }
template <class Field>
boost::beast::string_view name_of(const Field& field) {
  return field.name_string();
}
template <class Field>
boost::beast::string_view value_of(const Field& field) {
  return field.value();
}
template <class Field>
beast_http::field id_of(const Field& field) {
  return field.name();
}

template <class Fields>
std::string joined_connection_lines(const Fields& fields) {
  std::string joined;
  for (const auto& field : fields) {
    if (id_of(field) != beast_http::field::connection || value_of(field).empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined.append(value_of(field));
  }
  return joined;
}

template <class Fields>
std::size_t fields_size(const Fields& fields) {
  std::size_t size = 2;  // the empty line
  for (const auto& field : fields) size += name_of(field).size() + 2 + value_of(field).size() + 2;
  return size;
}

template <class Fields>
void put_fields(char*& at, const Fields& fields) {
  for (const auto& field : fields) {
    put(at, name_of(field));
    put(at, ':', ' ');
    put(at, value_of(field));
    put(at, '\r', '\n');
  }
  put(at, '\r', '\n');
}

template <class Fields>
void put_request_head(boost::beast::string_view method, boost::beast::string_view target, unsigned version,
                      const Fields& fields, std::string& out) {
  out.resize(method.size() + (target.empty() ? 0 : 1 + target.size()) + 1 + kVersionSize + 2 + fields_size(fields));
  char* at = out.data();
  put(at, method);
  if (!target.empty()) {
    *at++ = ' ';
    put(at, target);
  }
  *at++ = ' ';
  put_version(at, version);
  put(at, '\r', '\n');
  put_fields(at, fields);
}

}  // namespace

std::string connection_list(std::span<const FieldView> fields) { return joined_connection_lines(fields); }

std::string connection_list(const boost::beast::http::fields& fields) { return joined_connection_lines(fields); }

void write_head(const HeadRequest& request, std::string& out) {
  put_request_head(request.method_string(), request.target(), request.version(), request.base(), out);
}

void write_head(std::string_view method, std::string_view target, unsigned version, std::span<const FieldView> fields,
                std::string& out) {
  put_request_head(method, target, version, fields, out);
}

void write_head(const boost::beast::http::response_header<>& response, std::string& out) {
  const beast_http::fields& fields = response;  // a head is its fields, with a start line
  const auto reason = response.reason();        // the standard phrase when the message has none
  out.resize(kVersionSize + 1 + 3 + 1 + reason.size() + 2 + fields_size(fields));
  char* at = out.data();
  put_version(at, response.version());
  const unsigned status = response.result_int();
  put(at, ' ', static_cast<char>('0' + status / 100));
  put(at, static_cast<char>('0' + status / 10 % 10), static_cast<char>('0' + status % 10));
  *at++ = ' ';
  put(at, reason);
  put(at, '\r', '\n');
  put_fields(at, fields);
}

// A walk comparing the names' enums: cheaper than a lookup by name, which compares strings.
template <class Fields>
bool has_transfer_encoding(const Fields& fields) {
  for (const auto& field : fields) {
    if (field.name() == beast_http::field::transfer_encoding) return true;
  }
  return false;
}

bool body_sent_as_is(const HeadRequest& request) { return !has_transfer_encoding(request.base()); }

bool body_sent_as_is(const HeadResponse& response) { return !has_transfer_encoding(response.base()); }

}  // namespace idem::wire
