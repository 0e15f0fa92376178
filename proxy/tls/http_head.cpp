#include "tls/http_head.hpp"

namespace idem::tls {
namespace beast_http = boost::beast::http;
namespace {

void append(std::string& out, boost::beast::string_view text) { out.append(text.data(), text.size()); }

// "HTTP/x.y", the digits as Beast writes them (version / 10, version % 10).
void append_version(std::string& out, unsigned version) {
  out += "HTTP/";
  out += static_cast<char>('0' + version / 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
}

template <class Fields>
void append_fields(std::string& out, const Fields& fields) {
  for (const auto& field : fields) {
    append(out, field.name_string());
    out += ": ";
    append(out, field.value());
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace

void write_head(const HeadRequest& request, std::string& out) {
  out.clear();
  append(out, request.method_string());
  if (!request.target().empty()) {
    out += ' ';
    append(out, request.target());
  }
  out += ' ';
  append_version(out, request.version());
  out += "\r\n";
  append_fields(out, request.base());
}

void write_head(const HeadResponse& response, std::string& out) {
  out.clear();
  append_version(out, response.version());
  const unsigned status = response.result_int();
  out += ' ';
  out += static_cast<char>('0' + status / 100);
  out += static_cast<char>('0' + status / 10 % 10);
  out += static_cast<char>('0' + status % 10);
  out += ' ';
  append(out, response.reason());  // the standard phrase when the message has none
  out += "\r\n";
  append_fields(out, response.base());
}

bool body_sent_as_is(const HeadRequest& request) { return request.count(beast_http::field::transfer_encoding) == 0; }

bool body_sent_as_is(const HeadResponse& response) { return response.count(beast_http::field::transfer_encoding) == 0; }

}  // namespace idem::tls
