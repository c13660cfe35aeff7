// io/json_writer.h — a small streaming JSON writer.
//
// Contract: appends JSON text to one std::string as values are emitted; no
// document tree is built, so writing a graph costs one pass and the output
// buffer. Commas are placed automatically; the caller is responsible for
// balancing begin/end calls and for emitting a key before each object member.
// Output is deterministic: integers in decimal, doubles in the shortest form
// that reads back to the same bits and always with a '.' or an exponent (so a
// reader sees a float, not an int), strings escaped per RFC 8259. Non-finite
// doubles have no JSON form; callers decide how to spell them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat::io {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void begin_object() { value_prefix(); out_ += '{'; first_.push_back(true); }
  void end_object() { first_.pop_back(); out_ += '}'; }
  void begin_array() { value_prefix(); out_ += '['; first_.push_back(true); }
  void end_array() { first_.pop_back(); out_ += ']'; }

  // An object member's key; the next value call is its value.
  void key(std::string_view k) {
    separator();
    append_string(k);
    out_ += ':';
    after_key_ = true;
  }

  void string(std::string_view s) { value_prefix(); append_string(s); }
  void integer(int64_t v);
  void number(double v);  // finite only
  void boolean(bool v) { value_prefix(); out_ += v ? "true" : "false"; }
  void null() { value_prefix(); out_ += "null"; }
  // A value already serialized as JSON (a document's minified text of it).
  void raw(std::string_view json) { value_prefix(); out_ += json; }

  // A line break and `indent` spaces before the next member or element;
  // purely cosmetic (one node per line keeps big files diffable).
  void newline(int indent) {
    pending_newline_ = true;
    pending_indent_ = indent;
  }
  // A line break now (before a closing bracket).
  void break_line(int indent) {
    out_ += '\n';
    out_.append(static_cast<size_t>(indent), ' ');
  }

  // Appends `s` as a quoted, escaped JSON string.
  void append_string(std::string_view s);

 private:
  void separator() {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
    if (pending_newline_) {
      out_ += '\n';
      out_.append(static_cast<size_t>(pending_indent_), ' ');
      pending_newline_ = false;
    }
  }
  void value_prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    separator();
  }

  std::string& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
  bool pending_newline_ = false;
  int pending_indent_ = 0;
};

// The shortest round-trip text of a finite double, always with '.' or 'e'.
std::string format_double(double v);

}  // namespace remat::io
