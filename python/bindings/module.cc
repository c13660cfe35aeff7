// remat._remat — the extension module. It converts between Python and the
// engine and does nothing else.
//
// Contract:
//  * Documents cross as one bytes buffer each way (format v1, docs/format.md);
//    nothing is converted per node here. Options are remat::read_options'
//    (the options object of docs/format.md); the binding only adds hooks.
//  * The engine runs with the GIL released.
//  * remat::Error becomes the remat.errors class of its code (NoFiniteCutError
//    with .explanation, .dot and .edge_list; BudgetUnreachableError with
//    .smallest_peak and .proven_bound); any other C++ exception of the
//    engine becomes remat.InternalError (out of memory stays MemoryError).
//  * partition() and pareto() take two optional Python callables, the engine's
//    custom hooks (remat/options.h): knapsack_solver(memory: list[float],
//    max_memory: float, banned: list[int]) -> (saved, recomputed) lists of
//    ints, and runtime_estimator(joint_id: int) -> float. Passing one selects
//    it ("custom" solver / estimator). partition() also takes
//    offload_node_runtime(joint_id: int) -> float (milliseconds), the node
//    runtimes activation_reload_prefetch reads, and size_check(joint_id: int,
//    guard: bool) -> bool | None, the FP8 quantization pass's symbolic-size
//    question. Each call re-acquires the GIL; an exception it raises unwinds
//    the engine and reaches the caller unchanged.
//  * write_file(path: bytes, content: bytes) is remat::write_file_atomic, the
//    command line's writer, so every file remat writes from Python is
//    written as the CLI writes its own; no_cut_report renders a
//    NoFiniteCutError's diagnosis page (remat::html_no_cut_report).
//  * partition_saving(joint_json, options_json, saved) is a plan replay, not
//    a partitioner: the min-cut pipeline's extraction, rewrites and memory
//    simulation on exactly the saved values named (remat::emit_partition
//    with the decision replaced), the same result document as partition().
//    For oracles and tests that enumerate plans; a name that is no node of
//    the joint graph is an InvalidOptionError naming it.
//  * unmatched_op_keys(joint_json, options_json) -> list[str] is
//    remat::unmatched_op_keys: the options' "ops" keys no operator of the
//    graph has (remat.partition warns about them, as the command line does).
//  * partition() takes an optional rank group (remat/sync.h), a Python object
//    with rank(), world_size(), all_gather(str | list[str]) -> list,
//    all_reduce_max(list[int]) -> list[int], target_repr(name) -> str,
//    target_qualified_name(name) -> str and agreed(picked_rank, payload);
//    the same GIL and exception rules apply.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/remat.h"
#include "remat/pareto.h"

namespace nb = nanobind;

namespace {

// remat.errors.BY_CODE, fetched once at import; kept alive for the process
// (module objects are never torn down before interpreter exit).
PyObject* g_errors_by_code = nullptr;
PyObject* g_base_error = nullptr;
PyObject* g_torch_raises = nullptr;  // remat.errors.TORCH_RAISES

std::string_view view_of(const nb::bytes& b) {
  return {static_cast<const char*>(b.data()), b.size()};
}

nb::bytes to_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// The caller's Python callables for the engine's custom hooks (None when
// absent). Borrowed: the arguments of the binding call keep them alive for
// as long as the engine runs, and raw pointers make the hooks safe to copy
// without the GIL.
struct PyHooks {
  PyObject* knapsack_solver = nullptr;
  PyObject* runtime_estimator = nullptr;
  PyObject* offload_node_runtime = nullptr;
  PyObject* size_check = nullptr;
  PyObject* rank_group = nullptr;

  PyHooks(const nb::object& solver, const nb::object& estimator,
          const nb::object& offload_runtime = nb::none(), const nb::object& size = nb::none(),
          const nb::object& group = nb::none())
      : knapsack_solver(solver.is_none() ? nullptr : solver.ptr()),
        runtime_estimator(estimator.is_none() ? nullptr : estimator.ptr()),
        offload_node_runtime(offload_runtime.is_none() ? nullptr : offload_runtime.ptr()),
        size_check(size.is_none() ? nullptr : size.ptr()),
        rank_group(group.is_none() ? nullptr : group.ptr()) {}
};

// Converts a hook's Python result; a wrong type names the hook.
template <typename T>
T hook_result(nb::handle value, const char* hook, const char* expected) {
  T out;
  if (!nb::try_cast(value, out))
    throw remat::Error(remat::ErrorCode::kInvalidOption,
                       std::string(hook) + " returned " +
                           nb::cast<std::string>(nb::str(nb::handle(value.type()))) +
                           "; expected " + expected);
  return out;
}

// A knapsack solver's (saved, recomputed) result: two sequences of Python
// ints. An int outside C's int range cannot index any item list, so it
// becomes -1 and is skipped like every other out-of-range index
// (remat/options.h), rather than failing the conversion; a non-int is an
// error naming the hook and the element.
std::pair<std::vector<int>, std::vector<int>> knapsack_result(nb::handle r) {
  static constexpr const char* kHook = "custom knapsack solver";
  static constexpr const char* kExpected = "expected (saved, recomputed) sequences of ints";
  auto type_name = [](PyObject* o) { return nb::cast<std::string>(nb::str(nb::handle(Py_TYPE(o)))); };
  auto bad = [&](const std::string& what) {
    throw remat::Error(remat::ErrorCode::kInvalidOption,
                       std::string(kHook) + " returned " + what + "; " + kExpected);
  };
  auto as_sequence = [&](PyObject* o, const char* what) {
    if (PyUnicode_Check(o) || PyBytes_Check(o)) bad(type_name(o) + " as " + what);
    PyObject* fast = PySequence_Fast(o, "");
    if (fast == nullptr) {
      PyErr_Clear();
      bad(type_name(o) + " as " + what);
    }
    return nb::steal(fast);
  };
  const nb::object pair = as_sequence(r.ptr(), "its result");
  if (PySequence_Fast_GET_SIZE(pair.ptr()) != 2) {
    bad(std::to_string(PySequence_Fast_GET_SIZE(pair.ptr())) + " values");
  }
  std::vector<int> lists[2];
  static constexpr const char* kNames[2] = {"saved", "recomputed"};
  for (int k = 0; k < 2; ++k) {
    const nb::object seq = as_sequence(PySequence_Fast_GET_ITEM(pair.ptr(), k), kNames[k]);
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
    PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
    lists[k].reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!PyLong_Check(items[i])) {
        bad(type_name(items[i]) + " at " + kNames[k] + "[" + std::to_string(i) + "]");
      }
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
      const bool fits = overflow == 0 && v >= std::numeric_limits<int>::min() &&
                        v <= std::numeric_limits<int>::max();
      lists[k].push_back(fits ? static_cast<int>(v) : -1);
    }
  }
  return {std::move(lists[0]), std::move(lists[1])};
}

remat::CustomKnapsackFn knapsack_hook(PyObject* fn) {
  return [fn](const std::vector<double>& memory, double max_memory,
              const std::vector<remat::NodeId>& banned) {
    // The engine runs without the GIL (see partition below).
    nb::gil_scoped_acquire gil;
    nb::list mem, ids;
    for (double m : memory) mem.append(m);
    for (remat::NodeId id : banned) ids.append(id);
    nb::object r = nb::borrow(fn)(mem, max_memory, ids);  // nb::python_error on raise
    return knapsack_result(r);
  };
}

// A Python rank group as the engine's RankGroup. Borrowed like the hooks.
class PyRankGroup final : public remat::RankGroup {
 public:
  explicit PyRankGroup(PyObject* group) : group_(group) {}
  int rank() const override { return call<int>("rank", "an int"); }
  int world_size() const override { return call<int>("world_size", "an int"); }
  std::vector<std::string> all_gather(const std::string& mine) override {
    return call<std::vector<std::string>>("all_gather", "a list of str", mine);
  }
  std::vector<std::vector<std::string>> all_gather(const std::vector<std::string>& mine) override {
    return call<std::vector<std::vector<std::string>>>("all_gather", "a list of lists of str",
                                                       mine);
  }
  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& mine) override {
    return call<std::vector<int64_t>>("all_reduce_max", "a list of ints", mine);
  }
  std::string target_repr(std::string_view qualified) const override {
    return call<std::string>("target_repr", "a str", std::string(qualified));
  }
  std::string target_qualified_name(std::string_view qualified) const override {
    return call<std::string>("target_qualified_name", "a str", std::string(qualified));
  }
  void agreed(int picked_rank, const std::string& payload) override {
    nb::gil_scoped_acquire gil;
    nb::borrow(group_).attr("agreed")(picked_rank, payload);
  }

 private:
  template <typename T, typename... Args>
  T call(const char* method, const char* expected, const Args&... args) const {
    nb::gil_scoped_acquire gil;
    nb::object r = nb::borrow(group_).attr(method)(args...);  // nb::python_error on raise
    const std::string what = std::string("rank group's ") + method + "()";
    return hook_result<T>(r, what.c_str(), expected);
  }
  PyObject* group_;
};

remat::CustomRuntimeEstimatorFn estimator_hook(PyObject* fn, const char* what) {
  return [fn, what](remat::NodeId joint_node) {
    nb::gil_scoped_acquire gil;
    nb::object r = nb::borrow(fn)(joint_node);
    return hook_result<double>(r, what, "a float");
  };
}

// size_check(joint_id, guard) -> bool | None: the FP8 quantization pass's
// question about a symbolic size (remat/options.h, SymbolicSizeFn).
remat::SymbolicSizeFn size_hook(PyObject* fn) {
  return [fn](remat::NodeId joint_node, remat::SizeQuery how) -> std::optional<bool> {
    nb::gil_scoped_acquire gil;
    nb::object r = nb::borrow(fn)(joint_node, how == remat::SizeQuery::kGuard);
    if (r.is_none()) return std::nullopt;
    return hook_result<bool>(r, "size check", "a bool or None");
  };
}

// The engine's hooks for the caller's Python callables (remat/io.h's
// OptionHooks); the options themselves are read by remat::read_options.
remat::OptionHooks engine_hooks(const PyHooks& py) {
  remat::OptionHooks hooks;
  if (py.rank_group) hooks.rank_group = std::make_shared<PyRankGroup>(py.rank_group);
  if (py.knapsack_solver) hooks.knapsack_solver = knapsack_hook(py.knapsack_solver);
  if (py.runtime_estimator)
    hooks.runtime_estimator = estimator_hook(py.runtime_estimator, "custom runtime estimator");
  if (py.offload_node_runtime)
    hooks.offload_node_runtime = estimator_hook(py.offload_node_runtime, "offload node runtime");
  if (py.size_check) hooks.size_check = size_hook(py.size_check);
  return hooks;
}

void raise_error(const remat::Error& e, const char* explanation, const char* dot,
                 const char* edge_list) {
  PyObject* cls = g_errors_by_code
      ? PyDict_GetItemString(g_errors_by_code, remat::error_code_name(e.code()))
      : nullptr;
  if (!cls) cls = g_base_error ? g_base_error : PyExc_RuntimeError;
  PyObject* inst = explanation
      ? PyObject_CallFunction(cls, "ssss", e.what(), explanation, dot, edge_list)
      : PyObject_CallFunction(cls, "s", e.what());
  if (!inst) return;  // constructing the exception failed; that error stands
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst)), inst);
  Py_DECREF(inst);
}

// BudgetUnreachableError with its numbers as fields (-1, C++'s "none", as
// None).
void raise_budget_unreachable(const remat::BudgetUnreachableError& e) {
  PyObject* cls = g_errors_by_code
      ? PyDict_GetItemString(g_errors_by_code, remat::error_code_name(e.code()))
      : nullptr;
  if (!cls) {
    raise_error(e, nullptr, nullptr, nullptr);
    return;
  }
  auto bytes = [](int64_t v) -> nb::object {
    if (v < 0) return nb::none();
    return nb::int_(v);
  };
  nb::object smallest = bytes(e.smallest_peak()), bound = bytes(e.proven_bound());
  PyObject* inst = PyObject_CallFunction(cls, "sOO", e.what(), smallest.ptr(), bound.ptr());
  if (!inst) return;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst)), inst);
  Py_DECREF(inst);
}

// A TorchError: the remat.errors class named like torch's builtin exception
// (a RematError too), with torch's text; where remat met it is a note.
void raise_torch_error(const remat::TorchError& e) {
  PyObject* cls = g_torch_raises ? PyDict_GetItemString(g_torch_raises, e.python_type().c_str())
                                 : nullptr;
  if (!cls) {
    raise_error(e, nullptr, nullptr, nullptr);
    return;
  }
  PyObject* inst = PyObject_CallFunction(cls, "s", e.torch_message().c_str());
  if (!inst) return;
  if (!e.context().empty()) {
    PyObject* r = PyObject_CallMethod(inst, "add_note", "s", e.context().c_str());
    Py_XDECREF(r);
    if (!r) PyErr_Clear();  // a note is a courtesy, never the error
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst)), inst);
  Py_DECREF(inst);
}

// --- the engine calls, one per exported function ------------------------------
// Each releases the GIL while the engine runs: bytes objects are immutable
// and held by the caller, so their buffers stay valid meanwhile.

// Engine errors become remat.errors' classes (by error code); anything else
// escaping the engine is a bug in remat, raised as the RematError the
// contract promises rather than a bare RuntimeError.
void translate_exception(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const remat::NoFiniteCutError& e) {
    raise_error(e, e.explanation().c_str(), e.dot().c_str(), e.edge_list().c_str());
  } catch (const remat::BudgetUnreachableError& e) {
    raise_budget_unreachable(e);
  } catch (const remat::TorchError& e) {
    raise_torch_error(e);
  } catch (const remat::Error& e) {
    raise_error(e, nullptr, nullptr, nullptr);
  } catch (const nb::python_error&) {
    throw;  // a hook's Python exception: restored unchanged by nanobind
  } catch (const nb::builtin_exception&) {
    throw;  // nanobind's own TypeError, IndexError ...
  } catch (const std::bad_alloc&) {
    throw;  // MemoryError
  } catch (const std::exception& e) {
    raise_error(remat::Error(remat::ErrorCode::kInternal, std::string("internal error: ") + e.what()),
                nullptr, nullptr, nullptr);
  }
}

nb::bytes partition(nb::bytes joint_json, nb::bytes options_json, const std::string& partitioner,
                    nb::object knapsack_solver, nb::object runtime_estimator,
                    nb::object offload_node_runtime, nb::object size_check, nb::object rank_group) {
  std::string out;
  const remat::OptionHooks hooks = engine_hooks(PyHooks(
      knapsack_solver, runtime_estimator, offload_node_runtime, size_check, rank_group));
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::PartitionOptions options = remat::read_options(view_of(options_json), hooks, &joint);
    remat::PartitionResult result;
    if (partitioner == "min_cut") {
      result = remat::min_cut_rematerialization_partition(joint, options);
    } else if (partitioner == "default") {
      result = remat::default_partition(joint, options);
    } else {
      throw remat::Error(remat::ErrorCode::kInvalidOption,
                         "partitioner '" + partitioner + "': expected \"min_cut\" or \"default\"");
    }
    out = remat::write_result(joint, result, /*timings=*/true);  // Python results carry them
  }
  return to_bytes(out);
}

// The plan that saves exactly `saved_names` (joint node names, in the order
// torch would pass them on), built as the min-cut partitioner builds its
// own. The decision it replaces is made first (emit_partition needs a
// plan), so a peak_memory_budget, which would search for a plan only to
// have it replaced, is refused.
nb::bytes partition_saving(nb::bytes joint_json, nb::bytes options_json,
                           const std::vector<std::string>& saved_names, nb::object knapsack_solver,
                           nb::object runtime_estimator) {
  std::string out;
  const remat::OptionHooks hooks = engine_hooks(PyHooks(knapsack_solver, runtime_estimator));
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::PartitionOptions options = remat::read_options(view_of(options_json), hooks, &joint);
    if (options.peak_memory_budget > 0)
      throw remat::Error(remat::ErrorCode::kInvalidOption,
                         "partition_saving: the saved values are given; peak_memory_budget "
                         "would search for them (leave it out)");
    std::vector<remat::NodeId> saved;
    saved.reserve(saved_names.size());
    for (size_t i = 0; i < saved_names.size(); ++i) {
      const remat::NodeId id = joint.graph.find(saved_names[i]);
      if (id == remat::kNoNode)
        throw remat::Error(remat::ErrorCode::kInvalidOption,
                           "partition_saving: saved value #" + std::to_string(i) + " '" +
                               saved_names[i] + "' is not a node of the joint graph");
      saved.push_back(id);
    }
    remat::PartitionResult result = remat::emit_partition(
        remat::plan_min_cut_rematerialization_partition(joint, options), std::move(saved));
    out = remat::write_result(joint, result, /*timings=*/true);
  }
  return to_bytes(out);
}

using PointTuples = std::vector<std::tuple<double, double, double>>;

std::vector<remat::MemoryBudgetPoint> points_of(const PointTuples& tuples) {
  std::vector<remat::MemoryBudgetPoint> points;
  for (const auto& [budget, runtime, ratio] : tuples) points.push_back({budget, runtime, ratio});
  return points;
}

nb::list pareto(nb::bytes joint_json, nb::bytes options_json, double resolution,
                std::vector<double> budgets, nb::object knapsack_solver,
                nb::object runtime_estimator) {
  std::vector<remat::MemoryBudgetPoint> points;
  const remat::OptionHooks hooks = engine_hooks(PyHooks(knapsack_solver, runtime_estimator));
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::PartitionOptions options = remat::read_options(view_of(options_json), hooks, &joint);
    points = remat::memory_budget_pareto(joint, options, resolution, budgets);
  }
  nb::list out;
  for (const auto& p : points) out.append(nb::make_tuple(p.budget, p.recompute_runtime, p.memory_ratio));
  return out;
}

using PlanTuples = std::vector<std::tuple<std::string, int64_t, double, size_t>>;

PlanTuples plans(nb::bytes joint_json, nb::bytes options_json,
                 std::optional<std::vector<double>> budgets, nb::object knapsack_solver,
                 nb::object runtime_estimator) {
  if (!budgets) budgets.emplace(std::begin(remat::kPlanBudgets), std::end(remat::kPlanBudgets));
  std::vector<remat::BudgetPlanPoint> points;
  const remat::OptionHooks hooks = engine_hooks(PyHooks(knapsack_solver, runtime_estimator));
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::PartitionOptions options = remat::read_options(view_of(options_json), hooks, &joint);
    points = remat::budget_plans(joint, options, *budgets);
  }
  PlanTuples out;
  for (const auto& p : points) out.emplace_back(p.label, p.peak_bytes, p.recompute_runtime, p.saved_values);
  return out;
}

// remat::peak_frontier's plans as plans()' tuples, plus each plan's limit.
using FrontierTuples = std::vector<std::tuple<std::string, int64_t, double, size_t, int64_t>>;

FrontierTuples peak_frontier(nb::bytes joint_json, nb::bytes options_json, int points,
                             nb::object knapsack_solver, nb::object runtime_estimator) {
  std::vector<remat::BudgetPlanPoint> plans;
  const remat::OptionHooks hooks = engine_hooks(PyHooks(knapsack_solver, runtime_estimator));
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::PartitionOptions options = remat::read_options(view_of(options_json), hooks, &joint);
    plans = remat::peak_frontier(joint, options, points);
  }
  FrontierTuples out;
  for (const auto& p : plans)
    out.emplace_back(p.label, p.peak_bytes, p.recompute_runtime, p.saved_values, p.limit_bytes);
  return out;
}

std::string report(nb::bytes joint_json, nb::bytes result_json, const PointTuples& pareto_points,
                   const std::string& title, const std::string& pareto_note,
                   const PlanTuples& plan_tuples) {
  std::string out;
  {
    nb::gil_scoped_release release;
    remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::ReportOptions report;
    report.title = title;
    report.pareto_note = pareto_note;
    report.pareto = points_of(pareto_points);
    for (const auto& [label, peak, runtime, saved] : plan_tuples)
      report.plans.push_back({label, peak, runtime, saved});
    for (const auto& [key, cats] : joint.op_overrides) report.options.ops.set(key, cats);
    out = remat::html_report(joint, view_of(result_json), report);
  }
  return out;
}

// The page `remat report` writes for a graph with no finite cut; the error's
// fields come back from Python as they left (remat.NoFiniteCutError).
std::string no_cut_report(nb::bytes joint_json, const std::string& message,
                          const std::string& explanation, const std::string& dot,
                          const std::string& edge_list, const std::string& title) {
  std::string out;
  {
    nb::gil_scoped_release release;
    const remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
    remat::ReportOptions report;
    report.title = title;
    for (const auto& [key, cats] : joint.op_overrides) report.options.ops.set(key, cats);
    out = remat::html_no_cut_report(joint, remat::NoFiniteCutError(message, explanation, dot, edge_list),
                                    report);
  }
  return out;
}

std::vector<std::string> unmatched_op_keys(nb::bytes joint_json, nb::bytes options_json) {
  nb::gil_scoped_release release;
  const remat::JointGraph joint = remat::read_joint_graph(view_of(joint_json));
  return remat::unmatched_op_keys(joint, view_of(options_json));
}

// The path crosses as bytes (os.fsencode), so any name the file system
// takes arrives unchanged. Without the GIL: a FIFO's reader may be slow.
void write_file(nb::bytes path, nb::bytes content) {
  const std::string p(view_of(path));
  nb::gil_scoped_release release;
  remat::write_file_atomic(p, view_of(content));
}

nb::bytes simulate_memory(nb::bytes forward_json, nb::bytes backward_json, int num_fwd_outputs,
                          std::vector<std::string> mutated_inputs, const std::string& memory_model,
                          bool inductor_reorder) {
  std::string out;
  const std::optional<remat::MemoryModel> model = remat::memory_model_from_name(memory_model);
  if (!model)
    throw remat::Error(remat::ErrorCode::kInvalidOption,
                       "memory_model: expected \"aten\" or \"inductor\", got \"" + memory_model + "\"");
  {
    nb::gil_scoped_release release;
    const remat::JointGraph fw = remat::read_joint_graph(view_of(forward_json));
    const remat::JointGraph bw = remat::read_joint_graph(view_of(backward_json));
    std::vector<remat::NodeId> mutated;
    for (const std::string& name : mutated_inputs) {
      const remat::NodeId id = fw.graph.find(name);
      if (id == remat::kNoNode)
        throw remat::Error(remat::ErrorCode::kInvalidGraph,
                           "mutated_inputs: '" + name + "' is not a node of the forward");
      mutated.push_back(id);
    }
    const remat::MemoryProfile m = remat::simulate_memory(fw.graph, bw.graph, num_fwd_outputs, *model, inductor_reorder);
    out = remat::write_memory(fw.graph, bw.graph, m,
                              remat::find_mutation_hazards(fw.graph, bw.graph, num_fwd_outputs, mutated));
  }
  return to_bytes(out);
}

nb::bytes roundtrip(nb::bytes joint_json) {
  std::string out;
  {
    nb::gil_scoped_release release;
    out = remat::write_joint_graph(remat::read_joint_graph(view_of(joint_json)));
  }
  return to_bytes(out);
}

// remat.info()'s dict: GraphInfo's fields under stable keys.
nb::dict info(nb::bytes joint_json) {
  remat::GraphInfo info;
  {
    nb::gil_scoped_release release;
    info = remat::graph_info(remat::read_joint_graph(view_of(joint_json)));
  }
  nb::dict d;
  d["nodes"] = info.nodes;
  d["placeholder"] = info.by_kind[static_cast<int>(remat::NodeKind::kPlaceholder)];
  d["call_function"] = info.by_kind[static_cast<int>(remat::NodeKind::kCallFunction)];
  d["get_attr"] = info.by_kind[static_cast<int>(remat::NodeKind::kGetAttr)];
  d["output"] = info.by_kind[static_cast<int>(remat::NodeKind::kOutput)];
  d["ops"] = info.ops;
  d["tensors"] = info.tensors;
  d["num_fwd_outputs"] = info.num_fwd_outputs;
  d["static_lifetime_inputs"] = info.static_lifetime_inputs;
  d["op_overrides"] = info.op_overrides;
  nb::dict categories;
  for (size_t i = 0; i < info.by_category.size(); ++i)
    categories[nb::str(remat::kOpCategoryNames[i].name.data(), remat::kOpCategoryNames[i].name.size())] =
        info.by_category[i];
  categories["none"] = info.uncategorized;
  d["categories"] = categories;
  if (info.split_error.empty()) {
    d["forward"] = info.forward;
    d["backward"] = info.backward;
    d["unclaimed"] = info.unclaimed;
  } else {
    d["split_error"] = info.split_error;
  }
  d["activation_bytes"] = info.activation_bytes;
  d["unsized"] = info.unsized;
  return d;
}

// (major, minor, prerelease) of a torch version string, or None.
nb::object parse_torch_version(const std::string& text) {
  const std::optional<remat::TorchVersion> v = remat::parse_torch_version(text);
  if (!v) return nb::none();
  return nb::make_tuple(v->release.major, v->release.minor, v->prerelease);
}

// {"oldest": "2.11", "newest": "2.15",
//  "switches": [(name, since, where, what, test), ...]}
nb::dict torch_releases() {
  nb::dict d;
  d["oldest"] = remat::kOldestTorchRelease.str();
  d["newest"] = remat::kNewestTorchRelease.str();
  nb::list switches;
  for (const remat::TorchSwitch& s : remat::torch_switches()) {
    switches.append(nb::make_tuple(std::string(s.name), s.since.str(), std::string(s.where),
                                   std::string(s.what), std::string(s.test)));
  }
  d["switches"] = switches;
  return d;
}

}  // namespace

NB_MODULE(_remat, m) {
  m.doc() = "remat engine bindings: format-v1 JSON bytes in, bytes out.";

  nb::module_ errors = nb::module_::import_("remat.errors");
  g_errors_by_code = errors.attr("BY_CODE").ptr();
  Py_INCREF(g_errors_by_code);
  g_base_error = errors.attr("RematError").ptr();
  Py_INCREF(g_base_error);
  g_torch_raises = errors.attr("TORCH_RAISES").ptr();
  Py_INCREF(g_torch_raises);
  nb::register_exception_translator(translate_exception);

  m.def("version", [] { return std::string(remat::kVersion); });
  m.def("partition", &partition, nb::arg("joint_json"), nb::arg("options_json"),
        nb::arg("partitioner") = "min_cut", nb::arg("knapsack_solver") = nb::none(),
        nb::arg("runtime_estimator") = nb::none(), nb::arg("offload_node_runtime") = nb::none(),
        nb::arg("size_check") = nb::none(), nb::arg("rank_group") = nb::none(),
        "Partitions a joint graph; returns the partition-result document.");
  m.def("partition_saving", &partition_saving, nb::arg("joint_json"), nb::arg("options_json"),
        nb::arg("saved"), nb::arg("knapsack_solver") = nb::none(),
        nb::arg("runtime_estimator") = nb::none(),
        "A plan replay (for oracles and tests): the min-cut pipeline's plan that saves\n"
        "exactly `saved` (joint node names); returns the partition-result document.");
  m.def("pareto", &pareto, nb::arg("joint_json"), nb::arg("options_json"),
        nb::arg("resolution") = 1e-3, nb::arg("budgets") = std::vector<double>{},
        nb::arg("knapsack_solver") = nb::none(), nb::arg("runtime_estimator") = nb::none(),
        "The memory-budget Pareto frontier: [(budget, recompute_runtime, memory_ratio)];\n"
        "with `budgets`, exactly those budgets.");
  m.def(
      "pareto_svg", [](const PointTuples& points) { return remat::pareto_svg(points_of(points)); },
      nb::arg("points"),
      "The frontier [(budget, recompute_runtime, memory_ratio)] as remat's SVG chart.");
  m.def("plans", &plans, nb::arg("joint_json"), nb::arg("options_json"),
        nb::arg("budgets") = nb::none(), nb::arg("knapsack_solver") = nb::none(),
        nb::arg("runtime_estimator") = nb::none(),
        "torch's budget plans, built and simulated: [(label, peak_bytes, recompute_runtime,\n"
        "saved_values)]; `budgets` None: remat report's (kPlanBudgets).");
  m.def("peak_frontier", &peak_frontier, nb::arg("joint_json"), nb::arg("options_json"),
        nb::arg("points") = 8, nb::arg("knapsack_solver") = nb::none(),
        nb::arg("runtime_estimator") = nb::none(),
        "remat's own plans at `points` peak limits (options' peak_search: fast or exact):\n"
        "[(label, peak_bytes, recompute_runtime, saved_values, limit_bytes)], by peak.");
  m.def("report", &report, nb::arg("joint_json"), nb::arg("result_json"),
        nb::arg("pareto") = PointTuples{}, nb::arg("title") = "", nb::arg("pareto_note") = "",
        nb::arg("plans") = PlanTuples{}, "The partition's self-contained HTML report.");
  m.def("no_cut_report", &no_cut_report, nb::arg("joint_json"), nb::arg("message"),
        nb::arg("explanation") = "", nb::arg("dot") = "", nb::arg("edge_list") = "",
        nb::arg("title") = "", "The HTML page of a graph with no finite cut (its diagnosis).");
  m.def("unmatched_op_keys", &unmatched_op_keys, nb::arg("joint_json"), nb::arg("options_json"),
        "The options' \"ops\" keys that match no operator of the graph.");
  m.def("write_file", &write_file, nb::arg("path"), nb::arg("content"),
        "Writes a file as the remat command does (remat::write_file_atomic).");
  m.def("simulate_memory", &simulate_memory, nb::arg("forward_json"), nb::arg("backward_json"),
        nb::arg("num_fwd_outputs"), nb::arg("mutated_inputs") = std::vector<std::string>{},
        nb::arg("memory_model") = "aten", nb::arg("inductor_reorder") = true,
        "Simulates a forward/backward pair (two graph documents); returns\n"
        "{\"memory\": ..., \"hazards\": ...} as JSON bytes.");
  m.def("roundtrip", &roundtrip, nb::arg("joint_json"), "Reads a joint graph and writes it back.");
  m.def("parse_torch_version", &parse_torch_version, nb::arg("text"),
        "(major, minor, prerelease) of a torch version string, or None.");
  m.def("torch_releases", &torch_releases,
        "The supported torch releases and every behavioral switch between them.");
  m.def("info", &info, nb::arg("joint_json"),
        "What a joint graph holds (remat/info.h's GraphInfo, what `remat info` prints).");
}
