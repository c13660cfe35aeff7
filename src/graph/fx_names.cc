// graph/fx_names.cc — see fx_names.h.
#include "graph/fx_names.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <unordered_set>

namespace remat {
namespace {

// Names FX refuses to shadow: Python keywords and builtins, plus the few
// globals FX's generated code imports (torch.fx.graph._illegal_names).
bool is_illegal(std::string_view name) {
  static const std::unordered_set<std::string_view> kIllegal = {
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup", "BlockingIOError",
    "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
    "ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning",
    "EnvironmentError", "Exception", "ExceptionGroup", "False", "FileExistsError", "FileNotFoundError",
    "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning",
    "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt",
    "LookupError", "MemoryError", "ModuleNotFoundError", "NameError", "None", "NoneType",
    "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning",
    "PermissionError", "ProcessLookupError", "RecursionError", "ReferenceError", "ResourceWarning", "RuntimeError",
    "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError",
    "SystemExit", "TabError", "TimeoutError", "True", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning",
    "ValueError", "Warning", "ZeroDivisionError", "__build_class__", "__debug__", "__doc__",
    "__import__", "__loader__", "__name__", "__package__", "__spec__", "abs",
    "aiter", "all", "and", "anext", "any", "as",
    "ascii", "assert", "async", "await", "bin", "bool",
    "break", "breakpoint", "bytearray", "bytes", "callable", "chr",
    "class", "classmethod", "compile", "complex", "continue", "copyright",
    "credits", "def", "del", "delattr", "device", "dict",
    "dir", "divmod", "elif", "else", "enumerate", "eval",
    "except", "exec", "exit", "filter", "finally", "float",
    "for", "format", "from", "frozenset", "fx_pytree", "getattr",
    "global", "globals", "hasattr", "hash", "help", "hex",
    "id", "if", "import", "in", "inf", "input",
    "int", "is", "isinstance", "issubclass", "iter", "lambda",
    "len", "license", "list", "locals", "map", "max",
    "memoryview", "min", "nan", "next", "nonlocal", "not",
    "object", "oct", "open", "or", "ord", "pass",
    "pow", "print", "property", "pytree", "quit", "raise",
    "range", "repr", "return", "reversed", "round", "set",
    "setattr", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "torch", "try", "tuple", "type", "vars",
    "while", "with", "yield", "zip"};
  return kIllegal.count(name) != 0;
}

// Splits "base_12" into ("base", 12) like FX's r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$".
void split(std::string_view s, std::string_view& base, long& num, bool& has_num) {
  has_num = false;
  base = s;
  num = 0;
  size_t us = s.rfind('_');
  if (us == std::string_view::npos || us == 0 || us + 1 == s.size()) return;
  for (size_t i = us + 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return;
  }
  // Digits after the underscore; very long runs cannot be a count FX uses.
  if (s.size() - us - 1 > 18) return;
  base = s.substr(0, us);
  num = 0;
  for (char c : s.substr(us + 1)) num = num * 10 + (c - '0');
  has_num = true;
}

}  // namespace

std::string_view FxNamespace::keep(std::string_view s) {
  if (s.size() > chunk_left_) {
    const size_t size = std::max<size_t>(s.size(), 64 * 1024);
    chunks_.push_back(std::make_unique<char[]>(size));
    chunk_next_ = chunks_.back().get();
    chunk_left_ = size;
  }
  std::memcpy(chunk_next_, s.data(), s.size());
  std::string_view kept(chunk_next_, s.size());
  chunk_next_ += s.size();
  chunk_left_ -= s.size();
  return kept;
}

const FxNamespace::Slot* FxNamespace::find(std::string_view key) const {
  if (table_.empty()) return nullptr;
  const uint64_t h = std::hash<std::string_view>{}(key);
  for (size_t i = h & (table_.size() - 1);; i = (i + 1) & (table_.size() - 1)) {
    const Slot& s = table_[i];
    if (s.key.data() == nullptr) return nullptr;
    if (s.hash == h && s.key == key) return &s;
  }
}

FxNamespace::Slot& FxNamespace::slot(std::string_view key) {
  if (2 * (filled_ + 1) > table_.size()) {  // keep the load factor under 1/2
    std::vector<Slot> old = std::move(table_);
    table_.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
    for (const Slot& s : old) {
      if (s.key.data() == nullptr) continue;
      size_t i = s.hash & (table_.size() - 1);
      while (table_[i].key.data() != nullptr) i = (i + 1) & (table_.size() - 1);
      table_[i] = s;
    }
  }
  const uint64_t h = std::hash<std::string_view>{}(key);
  size_t i = h & (table_.size() - 1);
  for (; table_[i].key.data() != nullptr; i = (i + 1) & (table_.size() - 1)) {
    if (table_[i].hash == h && table_[i].key == key) return table_[i];
  }
  ++filled_;
  table_[i].key = key.empty() ? std::string_view("", 0) : keep(key);
  table_[i].hash = h;
  return table_[i];
}

std::string_view FxNamespace::create_name(std::string_view candidate_in) {
  // Each run of characters illegal in an identifier becomes one '_', as
  // FX's re.sub("[^0-9a-zA-Z_]+", "_", ...). Node names almost always are
  // identifiers already; only then is nothing copied.
  std::string sanitized;
  std::string_view candidate = candidate_in;
  bool identifier = !candidate.empty() && !std::isdigit(static_cast<unsigned char>(candidate[0]));
  for (char c : candidate) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') identifier = false;
  }
  if (!identifier) {
    bool in_run = false;
    for (char c : candidate_in) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        sanitized.push_back(c);
        in_run = false;
      } else if (!in_run) {
        sanitized.push_back('_');
        in_run = true;
      }
    }
    if (sanitized.empty()) sanitized = "_unnamed";
    if (std::isdigit(static_cast<unsigned char>(sanitized[0]))) sanitized = "_" + sanitized;
    candidate = sanitized;
  }

  std::string_view base;
  long num;
  bool has_num;
  split(candidate, base, num, has_num);
  const Slot* existing = find(candidate);
  const bool taken = existing != nullptr && existing->used;
  // The common cases, where FX returns the candidate itself: a free
  // "base_N" (the base's count becomes N), or a free legal "base" (FX
  // stores back the count it read, which changes nothing).
  if (!taken && (has_num || !is_illegal(candidate))) {
    Slot& s = slot(candidate);
    s.used = true;
    const std::string_view kept = s.key;
    if (has_num) {
      Slot& b = slot(kept.substr(0, base.size()));
      b.base_count = num;
      b.is_base = true;
    }
    return kept;
  }

  // Otherwise: continue counting from the base's last number.
  const Slot* b = find(base);
  num = b != nullptr && b->is_base ? b->base_count : 0;
  std::string name(candidate);
  if (is_illegal(name)) {
    ++num;
    name = std::string(base) + "_" + std::to_string(num);
  }
  for (const Slot* s = find(name); s != nullptr && s->used; s = find(name)) {
    ++num;
    name = std::string(base) + "_" + std::to_string(num);
  }
  Slot& s = slot(name);
  s.used = true;
  const std::string_view kept = s.key;
  Slot& bs = slot(base);
  bs.base_count = num;
  bs.is_base = true;
  return kept;
}

}  // namespace remat
