#pragma once
// The HTTP message types the proxy moves around: whole bodies in memory (bounded by the limits),
// because a request must be fingerprinted and a response stored before either is passed on.
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace idem::http {

namespace beast_http = boost::beast::http;
using Request = beast_http::request<beast_http::string_body>;
using Response = beast_http::response<beast_http::string_body>;

}  // namespace idem::http
