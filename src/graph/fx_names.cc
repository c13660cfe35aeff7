// graph/fx_names.cc — see fx_names.h.
#include "graph/fx_names.h"

#include <algorithm>
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

// ASCII classes, as Python's regex sees them (no locale lookups per char).
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A name split like FX's r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$": "base_12"
// is ("base", 12); a name without a numeric suffix is itself, with num 0.
struct NameParts {
  std::string_view base;
  long num = 0;
  bool has_num = false;
};

NameParts split(std::string_view s) {
  const NameParts whole{s, 0, false};
  size_t us = s.rfind('_');
  if (us == std::string_view::npos || us == 0 || us + 1 == s.size()) return whole;
  for (size_t i = us + 1; i < s.size(); ++i) {
    if (!is_digit(s[i])) return whole;
  }
  // Digits after the underscore; very long runs cannot be a count FX uses.
  if (s.size() - us - 1 > 18) return whole;
  long num = 0;
  for (char c : s.substr(us + 1)) num = num * 10 + (c - '0');
  return {s.substr(0, us), num, true};
}

// Whether FX's _name_regex matches as is: an identifier of ASCII letters,
// digits and underscores that does not start with a digit.
bool is_identifier(std::string_view s) {
  if (s.empty() || is_digit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), is_word_char);
}

// FX's re.sub("[^0-9a-zA-Z_]+", "_", ...), then its fixes for an empty
// name or one starting with a digit.
std::string sanitize(std::string_view s) {
  std::string out;
  bool in_run = false;
  for (char c : s) {
    if (is_word_char(c)) {
      out.push_back(c);
      in_run = false;
    } else if (!in_run) {
      out.push_back('_');
      in_run = true;
    }
  }
  if (out.empty()) out = "_unnamed";
  if (is_digit(out[0])) out = "_" + out;
  return out;
}

}  // namespace

FxNamespace::FxNamespace() : FxNamespace(std::make_shared<StringPool>(), true) {}

FxNamespace::FxNamespace(std::shared_ptr<StringPool> pool, bool count_by_base)
    : pool_(std::move(pool)), count_by_base_(count_by_base) {}

StrId FxNamespace::take(StrId s) {
  if (s >= used_.size()) used_.resize(std::max<size_t>(pool_->size(), s + 1), 0);
  used_[s] = 1;
  return s;
}

void FxNamespace::apply_pending_counts() {
  for (StrId s : pending_counts_) {
    const NameParts parts = split(pool_->view(s));
    base_count_[std::string(parts.base)] = parts.num;
  }
  pending_counts_.clear();
}

StrId FxNamespace::create(StrId candidate) {
  const std::string_view s = pool_->view(candidate);
  // The common cases, where FX returns the candidate itself: a free
  // "base_N" (the base's count becomes N), or a free legal "base" (FX
  // stores back the count it read, which changes nothing).
  if (is_identifier(s) && !used(candidate)) {
    if (split(s).has_num) {
      pending_counts_.push_back(candidate);
      return take(candidate);
    }
    if (!is_illegal(s)) return take(candidate);
  }
  return create_slow(std::string(s));
}

std::string_view FxNamespace::create_name(std::string_view candidate) {
  return pool_->view(create(pool_->intern(candidate)));
}

StrId FxNamespace::create_slow(std::string candidate) {
  if (!is_identifier(candidate)) candidate = sanitize(candidate);
  const NameParts parts = split(candidate);
  const std::string base_name(parts.base);
  apply_pending_counts();
  if (!used(candidate) && (parts.has_num || !is_illegal(candidate))) {
    if (parts.has_num) base_count_[base_name] = parts.num;
    return take(pool_->intern(candidate));
  }
  // Otherwise: continue counting from the base's last number (2.12 on). 2.11
  // reads the count under the whole candidate: a taken "add_5" finds none
  // (unless some "add_5_K" was created) and takes the smallest free "add_K";
  // the count is stored under the base in both.
  const auto it = base_count_.find(count_by_base_ ? base_name : candidate);
  long num = it == base_count_.end() ? 0 : it->second;
  std::string name = candidate;
  if (is_illegal(name)) {
    ++num;
    name = base_name + "_" + std::to_string(num);
  }
  while (used(name)) {
    ++num;
    name = base_name + "_" + std::to_string(num);
  }
  base_count_[base_name] = num;
  return take(pool_->intern(name));
}

}  // namespace remat
