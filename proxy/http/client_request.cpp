#include "http/client_request.hpp"

#include <boost/beast/core/string.hpp>
#include <algorithm>
#include <cstring>
#include <utility>

namespace idem::http {

void ClientRequest::clear() {
  parts_.method = beast_http::verb::unknown;
  parts_.method_string = {};
  parts_.target = {};
  parts_.version = 11;
  parts_.fields.clear();
  parts_.body = {};
  storage_.clear();
  stored_fields_.clear();
  method_size_ = target_size_ = 0;
  body_.clear();
  head_done_ = false;
}

std::uint32_t ClientRequest::store(std::string_view text) {
  // The parser's header limit (a few tens of KiB) keeps every offset far below 2^32.
  const auto at = static_cast<std::uint32_t>(storage_.size());
  storage_.append(text);
  return at;
}

void ClientRequest::set_target(std::string target) {
  target_ = std::move(target);
  parts_.target = target_;
}

void ClientRequest::set_field(beast_http::field id, std::string_view name, std::string_view value) {
  std::erase_if(parts_.fields, [&](const FieldView& field) { return boost::beast::iequals(field.name, name); });
  parts_.fields.push_back({id, name, value});
}

void ClientRequest::set_host(std::string authority) {
  host_ = std::move(authority);
  set_field(beast_http::field::host, "Host", host_);
}

ClientRequestParser::ClientRequestParser(ClientRequest& request) : request_(request) { request_.clear(); }

void ClientRequestParser::on_request_impl(beast_http::verb method, boost::beast::string_view method_string,
                                          boost::beast::string_view target, int version, boost::beast::error_code&) {
  request_.parts_.method = method;
  request_.parts_.version = static_cast<unsigned>(version);
  request_.method_at_ = request_.store(method_string);
  request_.method_size_ = static_cast<std::uint32_t>(method_string.size());
  request_.target_at_ = request_.store(target);
  request_.target_size_ = static_cast<std::uint32_t>(target.size());
}

void ClientRequestParser::on_field_impl(beast_http::field id, boost::beast::string_view name,
                                        boost::beast::string_view value, boost::beast::error_code&) {
  // Trailer fields of a chunked body come after the head the validator saw and could carry what a
  // front proxy that checked the head never saw (Authorization): dropped, never merged into the
  // forwarded head, the scope or the key.
  if (request_.head_done_) return;
  const std::uint32_t name_at = request_.store(name);
  const std::uint32_t value_at = request_.store(value);
  request_.stored_fields_.push_back(
      {id, name_at, static_cast<std::uint32_t>(name.size()), value_at, static_cast<std::uint32_t>(value.size())});
}

void ClientRequestParser::on_header_impl(boost::beast::error_code&) {
  ClientRequest& request = request_;
  request.head_done_ = true;
  request.parts_.method_string = request.stored(request.method_at_, request.method_size_);
  request.parts_.target = request.stored(request.target_at_, request.target_size_);
  request.parts_.fields.reserve(request.stored_fields_.size() + 2);  // room for the connection's edits
  for (const auto& field : request.stored_fields_) {
    request.parts_.fields.push_back(
        {field.id, request.stored(field.name_at, field.name_size), request.stored(field.value_at, field.value_size)});
  }
}

void ClientRequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                            boost::beast::error_code&) {
  // Bounded by the parser's body limit, checked before this is called.
  if (content_length && !streaming_) request_.body_.reserve(static_cast<std::size_t>(*content_length));
}

std::size_t ClientRequestParser::to_window(boost::beast::string_view body, boost::beast::error_code& ec) {
  const std::size_t taken = std::min(body.size(), window_left_);
  if (taken > 0) std::memcpy(window_, body.data(), taken);
  window_ += taken;
  window_left_ -= taken;
  if (taken < body.size()) ec = beast_http::error::need_buffer;
  return taken;
}

std::size_t ClientRequestParser::on_body_impl(boost::beast::string_view body, boost::beast::error_code& ec) {
  if (streaming_) return to_window(body, ec);
  request_.body_.append(body);
  return body.size();
}

std::size_t ClientRequestParser::on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                                                    boost::beast::error_code& ec) {
  if (streaming_) return to_window(body, ec);
  request_.body_.append(body);
  return body.size();
}

void ClientRequestParser::on_finish_impl(boost::beast::error_code&) { request_.parts_.body = request_.body_; }

}  // namespace idem::http
