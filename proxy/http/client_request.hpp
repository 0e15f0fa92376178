#pragma once
// A client's request as this proxy reads it: the start line, the header fields in arrival order
// (names and values copied once, into one buffer the connection keeps for its next request), the
// body, and the edits the connection makes before the request is handled. Beast's parser fills
// it without building a Beast message: a field tree costs more than forwarding the request.
#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/request_parts.hpp"

namespace idem::http {

class ClientRequest {
 public:
  // Valid once the parser has read the head (the body: the whole request).
  const RequestParts& parts() const { return parts_; }
  // Method and target bytes, known once the request line is parsed (0 before).
  std::size_t request_line_size() const { return method_size_ + target_size_; }

  // The target the request is routed and forwarded by (core/request_target.hpp).
  void set_target(std::string target);
  // Every line of the field named `name` replaced by one, last, with `value`, which must outlive
  // the request (a literal).
  void set_field(beast_http::field id, std::string_view name, std::string_view value);
  // Host replaced so, by the authority of an absolute-form target.
  void set_host(std::string authority);

 private:
  friend class ClientRequestParser;
  // Offsets into storage_ while the head is read (the buffer may move), views once it is complete.
  struct StoredField {
    beast_http::field id;
    std::uint32_t name_at, name_size, value_at, value_size;
  };

  void clear();
  std::string_view stored(std::uint32_t at, std::uint32_t size) const { return {storage_.data() + at, size}; }
  std::uint32_t store(std::string_view text);

  RequestParts parts_;
  std::string storage_;  // the method, the target, every name and value, as received
  std::vector<StoredField> stored_fields_;
  std::uint32_t method_at_ = 0, method_size_ = 0, target_at_ = 0, target_size_ = 0;
  std::string target_;  // set_target's
  std::string host_;    // set_host's
  std::string body_;
  bool head_done_ = false;
};

// Parses one request into a ClientRequest (cleared first; its buffers' capacity kept). Used as
// Beast's own parser is: header and body limits, async_read_header, async_read.
class ClientRequestParser final : public beast_http::basic_parser<true> {
 public:
  explicit ClientRequestParser(ClientRequest& request);

  // A streamed body (wire/body_pump.hpp) is not kept: once a window is set, body bytes are copied
  // into it, and parsing stops with error::need_buffer when it is full (as Beast's buffer_body
  // does); parts().body stays empty. Set before the body's first byte is parsed.
  void body_window(char* data, std::size_t size) {
    streaming_ = true;
    window_ = data;
    window_left_ = size;
  }
  std::size_t body_window_left() const { return window_left_; }

 private:
  std::size_t to_window(boost::beast::string_view body, boost::beast::error_code& ec);

  void on_request_impl(beast_http::verb method, boost::beast::string_view method_string,
                       boost::beast::string_view target, int version, boost::beast::error_code& ec) override;
  void on_response_impl(int, boost::beast::string_view, int, boost::beast::error_code&) override {}
  void on_field_impl(beast_http::field id, boost::beast::string_view name, boost::beast::string_view value,
                     boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length, boost::beast::error_code& ec) override;
  std::size_t on_body_impl(boost::beast::string_view body, boost::beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, boost::beast::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t remain, boost::beast::string_view body,
                                 boost::beast::error_code& ec) override;
  void on_finish_impl(boost::beast::error_code& ec) override;

  ClientRequest& request_;
  bool streaming_ = false;
  char* window_ = nullptr;
  std::size_t window_left_ = 0;
};

}  // namespace idem::http
