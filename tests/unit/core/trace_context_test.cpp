// W3C traceparent/tracestate checks (core/trace_context.hpp), with the specification's examples.
#include "core/trace_context.hpp"

#include <gtest/gtest.h>

#include <string>

namespace idem::core {
namespace {

TEST(TraceContext, TraceparentOfTheSpecificationIsValid) {
  EXPECT_TRUE(is_valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  EXPECT_TRUE(is_valid_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
  // A later version may append fields after a '-'; parsed as 00.
  EXPECT_TRUE(is_valid_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next"));
  EXPECT_TRUE(is_valid_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
}

TEST(TraceContext, MalformedTraceparentsAreRejected) {
  const std::string good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  EXPECT_FALSE(is_valid_traceparent(""));
  EXPECT_FALSE(is_valid_traceparent(good.substr(0, 54)));  // short
  EXPECT_FALSE(is_valid_traceparent(good + "-00"));        // version 00 takes nothing more
  EXPECT_FALSE(is_valid_traceparent("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));   // version ff
  EXPECT_FALSE(is_valid_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"));   // uppercase
  EXPECT_FALSE(is_valid_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01"));   // zero trace id
  EXPECT_FALSE(is_valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"));   // zero parent id
  EXPECT_FALSE(is_valid_traceparent("00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));   // separator
  EXPECT_FALSE(is_valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g"));   // flags
  EXPECT_FALSE(is_valid_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x"));  // no '-' after
  EXPECT_FALSE(is_valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-Injected: 1"));
}

TEST(TraceContext, TracestateIsPrintableAndBounded) {
  EXPECT_TRUE(is_valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_FALSE(is_valid_tracestate(""));
  EXPECT_FALSE(is_valid_tracestate("   "));
  EXPECT_FALSE(is_valid_tracestate("rojo=1\r\nX-Injected: 1"));
  EXPECT_TRUE(is_valid_tracestate(std::string(512, 'a')));
  EXPECT_FALSE(is_valid_tracestate(std::string(513, 'a')));
}

}  // namespace
}  // namespace idem::core
