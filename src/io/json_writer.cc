// io/json_writer.cc — see json_writer.h.
#include "io/json_writer.h"

#include <fmt/format.h>

namespace remat::io {

void JsonWriter::integer(int64_t v) {
  value_prefix();
  fmt::format_int f(v);
  out_.append(f.data(), f.size());
}

std::string format_double(double v) {
  // fmt's default presentation is the shortest representation that round
  // trips (Dragonbox); it prints 3.0 as "3", which a reader would take for an
  // integer, so a ".0" is added when neither '.' nor an exponent is present.
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void JsonWriter::number(double v) {
  value_prefix();
  out_ += format_double(v);
}

void JsonWriter::append_string(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_ += '"';
  size_t run = 0;  // start of the current stretch that needs no escaping
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out_.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      case '\b': out_ += "\\b"; break;
      case '\f': out_ += "\\f"; break;
      default:
        out_ += "\\u00";
        out_ += kHex[c >> 4];
        out_ += kHex[c & 0xf];
    }
  }
  out_.append(s.data() + run, s.size() - run);
  out_ += '"';
}

}  // namespace remat::io
