#pragma once
// Renders a parsed destination template (stream name, URL target) for one row.
#include <string>

#include "config/relay_config.hpp"
#include "relay/outbox_row.hpp"

namespace idem::relay {

enum class TemplateEscaping {
  none,         // stream names: the values as they are
  url_segment,  // URL targets: each value percent-encoded (RFC 3986 unreserved kept)
};

std::string render(const config::MessageTemplate& message_template, const OutboxRow& row, TemplateEscaping escaping);

}  // namespace idem::relay
