#pragma once
// An HTTP/1.x message's head as bytes, byte for byte what Beast's serializer writes: the start
// line (a response without a reason phrase gets the standard one), every field as stored, the
// empty line. Written into a buffer the caller keeps per connection, then sent with the body in
// one gathered write: Beast's serializer walks a buffer sequence of every field and costs more
// than the rest of a proxied request.
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <span>
#include <string>
#include <string_view>

namespace idem::wire {

// A header field as views of a name and a value stored elsewhere; `id` is Beast's enum for the
// name (field::unknown when Beast has none, or when the proxy added the field).
struct FieldView {
  boost::beast::http::field id = boost::beast::http::field::unknown;
  std::string_view name;
  std::string_view value;
};

using HeadRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HeadResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Every Connection line, as one comma-separated list (RFC 9110 §5.3: several lines of a list
// field are one field; a proxy that reads only the first drops the rest).
std::string connection_list(std::span<const FieldView> fields);
std::string connection_list(const boost::beast::http::fields& fields);

// Replaces `out` with the message's head.
void write_head(const HeadRequest& request, std::string& out);
void write_head(const boost::beast::http::response_header<>& response, std::string& out);
// A request head from its parts, the fields in the order given.
void write_head(std::string_view method, std::string_view target, unsigned version, std::span<const FieldView> fields,
                std::string& out);

// Whether the body goes out as the bytes it holds: false when a Transfer-Encoding field asks for a
// coding (chunked), which only Beast's serializer applies.
bool body_sent_as_is(const HeadRequest& request);
bool body_sent_as_is(const HeadResponse& response);

}  // namespace idem::wire
