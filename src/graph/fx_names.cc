// graph/fx_names.cc — see fx_names.h.
#include "graph/fx_names.h"

#include <cctype>

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
  num = std::stol(std::string(s.substr(us + 1)));
  has_num = true;
}

}  // namespace

std::string FxNamespace::create_name(std::string_view candidate_in) {
  // Each run of characters illegal in an identifier becomes one '_', as
  // FX's re.sub("[^0-9a-zA-Z_]+", "_", ...).
  std::string candidate;
  candidate.reserve(candidate_in.size());
  bool in_run = false;
  for (char c : candidate_in) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      candidate.push_back(c);
      in_run = false;
    } else if (!in_run) {
      candidate.push_back('_');
      in_run = true;
    }
  }
  if (candidate.empty()) candidate = "_unnamed";
  if (std::isdigit(static_cast<unsigned char>(candidate[0]))) candidate = "_" + candidate;

  std::string_view base_view;
  long num;
  bool has_num;
  split(candidate, base_view, num, has_num);
  std::string base(base_view);
  if (!has_num || used_.count(candidate)) {
    auto it = base_count_.find(base);
    num = it == base_count_.end() ? 0 : it->second;
    if (is_illegal(candidate)) {
      ++num;
      candidate = base + "_" + std::to_string(num);
    }
  }
  while (used_.count(candidate)) {
    ++num;
    candidate = base + "_" + std::to_string(num);
  }
  used_.insert(candidate);
  base_count_[base] = num;
  return candidate;
}

}  // namespace remat
