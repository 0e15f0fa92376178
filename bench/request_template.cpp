#include "request_template.hpp"

#include <boost/beast/core/string.hpp>

namespace idem::bench {
namespace {
bool has_header(const LoadgenOptions& options, std::string_view name) {
  for (const auto& [field, value] : options.headers) {
    if (boost::beast::iequals(field, name)) return true;
  }
  return false;
}
}  // namespace

RequestTemplate::RequestTemplate(const LoadgenOptions& options) {
  head_ = options.method + " " + options.path + " HTTP/1.1\r\n";
  if (!has_header(options, "Host")) head_ += "Host: " + options.target.text() + "\r\n";
  if (!options.body.empty() && !has_header(options, "Content-Type")) head_ += "Content-Type: application/json\r\n";
  // Always framed, even when empty: a POST without Content-Length is refused by some servers.
  head_ += "Content-Length: " + std::to_string(options.body.size()) + "\r\n";
  for (const auto& [name, value] : options.headers) head_ += name + ": " + value + "\r\n";
  key_prefix_ = options.key_header + ": ";
  tail_ = "\r\n" + options.body;
}

void RequestTemplate::render(std::string_view key, std::string& out) const {
  out.assign(head_);
  if (!key.empty()) {
    out += key_prefix_;
    out += key;
    out += "\r\n";
  }
  out += tail_;
}

}  // namespace idem::bench
