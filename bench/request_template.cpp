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
  for (const auto& [name, value] : options.headers) fields_ += name + ": " + value + "\r\n";
  key_prefix_ = options.key_header + ": ";
  const std::size_t placeholder = options.body.find(kBodyKeyPlaceholder);
  key_in_body_ = placeholder != std::string::npos;
  body_ = options.body.substr(0, placeholder);
  if (key_in_body_) body_after_ = options.body.substr(placeholder + kBodyKeyPlaceholder.size());
  // Always framed, even when empty: a POST without Content-Length is refused by some servers.
  if (!key_in_body_) length_ = "Content-Length: " + std::to_string(body_.size()) + "\r\n";
}

void RequestTemplate::render(std::string_view key, std::string& out) const {
  out.assign(head_);
  if (key_in_body_) {
    out += "Content-Length: ";
    out += std::to_string(body_.size() + key.size() + body_after_.size());
    out += "\r\n";
  } else {
    out += length_;
  }
  out += fields_;
  if (!key.empty()) {
    out += key_prefix_;
    out += key;
    out += "\r\n";
  }
  out += "\r\n";
  out += body_;
  if (key_in_body_) {
    out += key;
    out += body_after_;
  }
}

}  // namespace idem::bench
