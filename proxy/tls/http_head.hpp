#pragma once
// An HTTP/1.x message's head as bytes, byte for byte what Beast's serializer writes: the start
// line (a response without a reason phrase gets the standard one), every field as stored, the
// empty line. Written into a buffer the caller keeps per connection, then sent with the body in
// one gathered write: Beast's serializer walks a buffer sequence of every field and costs more
// than the rest of a proxied request.
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>

namespace idem::tls {

using HeadRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HeadResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Replaces `out` with the message's head.
void write_head(const HeadRequest& request, std::string& out);
void write_head(const HeadResponse& response, std::string& out);

// Whether the body goes out as the bytes it holds: false when a Transfer-Encoding field asks for a
// coding (chunked), which only Beast's serializer applies.
bool body_sent_as_is(const HeadRequest& request);
bool body_sent_as_is(const HeadResponse& response);

}  // namespace idem::tls
