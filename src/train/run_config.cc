#include "train/run_config.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "ckpt/memory_copy.h"
#include "core/numeric.h"
#include "spec/field_reader.h"
#include "spec/limits.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::train {
namespace {

// Reads the engine's own tables; collects every error with its dotted field name.
void ReadOptim(const toml::table& root, OptimConfig& o, std::vector<std::string>* errors) {
  auto r = spec::FieldReader::Table(root, "optim", errors);
  r.Double("lr", o.lr, false, 0, true);
  r.Double("min_lr", o.min_lr, false, 0, false);
  r.Int("warmup_steps", o.warmup_steps, false, 0);
  r.Double("beta1", o.adamw.beta1, false, 0, false);
  r.Double("beta2", o.adamw.beta2, false, 0, false);
  r.Double("eps", o.adamw.eps, false, 0, true);
  r.Double("weight_decay", o.adamw.weight_decay, false, 0, false);
  r.Double("grad_clip", o.adamw.grad_clip, false, 0, false);
  r.Double("aux_loss_coef", o.aux_loss_coef, false, 0, false);
  r.Double("z_loss_coef", o.z_loss_coef, false, 0, false);
  r.Double("bias_update_rate", o.bias_update_rate, false, 0, false);
  r.RejectUnknown();
  if (o.adamw.beta1 >= 1) r.Error("beta1", fmt::format("must be < 1 (got {})", o.adamw.beta1));
  if (o.adamw.beta2 >= 1) r.Error("beta2", fmt::format("must be < 1 (got {})", o.adamw.beta2));
  if (o.min_lr > o.lr) r.Error("min_lr", fmt::format("{} exceeds lr={}", o.min_lr, o.lr));
}

void ReadData(const toml::table& root, DataConfig& d, std::vector<std::string>* errors) {
  auto r = spec::FieldReader::Table(root, "data", errors);
  r.String("dataset", d.dataset);
  r.String("corpus", d.corpus);
  r.Double("heldout_fraction", d.heldout_fraction, false, 0, false);
  r.Int("split_seed", d.split_seed, false, 0, std::numeric_limits<int64_t>::max());
  r.RejectUnknown();
  if (d.dataset.empty()) r.Error("dataset", "missing (required): a tokenized dataset directory");
  if (d.heldout_fraction >= 1) r.Error("heldout_fraction", "must be < 1");
}

void ReadRun(const toml::table& root, RunOptions& o, std::vector<std::string>* errors) {
  auto r = spec::FieldReader::Table(root, "run", errors);
  r.Int("seed", o.seed, false, 0, std::numeric_limits<int64_t>::max());
  r.Int("steps", o.steps, false, 0);
  r.Int("lr_steps", o.lr_steps, false, 0);
  r.Int("data_start_step", o.data_start_step, false, 0);
  std::string layout;
  r.String("layout", layout);
  r.String("out_dir", o.out_dir);
  r.Int("eval_every", o.eval_every, false, 0);
  r.Int("eval_batches", o.eval_batches, false, 1);
  r.Int("log_every", o.log_every, false, 1);
  r.Int("threads", o.threads, false, 0);
  // Rates the cost model divides by: kMinRate..kMaxRate (a subnormal one made it NaN).
  r.Double("peak_gflops", o.peak_gflops, false, kMinRate, false, kMaxRate);
  r.Double("mem_gbps", o.mem_gbps, false, kMinRate, false, kMaxRate);
  r.String("host_profile", o.host_profile);
  const toml::table* run_table = root["run"].as_table();
  const bool explicit_host = run_table != nullptr && (run_table->contains("peak_gflops") ||
                                                      run_table->contains("mem_gbps"));
  o.auto_host_profile = o.host_profile.empty() && !explicit_host;
  if (o.host_profile == "none") {
    o.host_profile.clear();  // the nominal (or explicit) peak_gflops and mem_gbps
  } else if (!o.host_profile.empty()) {
    const toml::table* run = root["run"].as_table();
    for (const char* key : {"peak_gflops", "mem_gbps"}) {
      if (run != nullptr && run->contains(key)) {
        r.Error(key, "set together with run.host_profile, which measures it; keep one");
      }
    }
    auto host = LoadHostProfile(o.host_profile);
    if (!host.ok()) {
      r.Error("host_profile", host.status().message());
    } else {
      UseHostProfile(o, *host);
    }
  }
  r.Int("memory_limit_bytes", o.memory_limit_bytes, false, 0, std::numeric_limits<int64_t>::max());
  r.Int("max_nonfinite_in_row", o.max_nonfinite_in_row, false, 0);
  r.Double("spike_factor", o.spike_factor, false, 0, false);
  r.Int("spike_window", o.spike_window, false, 1);
  if (o.spike_factor > 0 && o.spike_factor <= 1)
    r.Error("spike_factor", fmt::format("must be 0 (off) or > 1 (got {})", o.spike_factor));
  r.Int("debug_nan_step", o.debug_nan_step, false, 0);
  r.Int("debug_nan_count", o.debug_nan_count, false, 1);
  r.Int("debug_kill_step", o.debug_kill_step, false, 0);
  r.Int("debug_kill_rank", o.debug_kill_rank, false, -1);
  r.RejectUnknown();
  if (!layout.empty()) {
    core::Result<spec::Layout> l = spec::ParseLayout(layout);
    if (!l.ok()) return r.Error("layout", l.status().message());
    o.layout = *l;
  }
  // Which degrees the engine runs is Trainer's rule (CheckEngineLayout), checked at launch
  // against the number of ranks.
}

void ReadCkpt(const toml::table& root, CkptConfig& c, std::vector<std::string>* errors) {
  auto r = spec::FieldReader::Table(root, "ckpt", errors);
  r.String("dir", c.dir);
  r.Int("interval", c.interval, false, 0);
  r.Int("keep", c.keep, false, 1);
  r.Bool("async", c.async);
  r.Int("memory_interval", c.memory_interval, false, 0);
  r.String("memory_key", c.memory_key);
  if (!c.memory_key.empty()) {
    if (const std::string problem = ckpt::MemoryKeyProblem(c.memory_key); !problem.empty())
      r.Error("memory_key", fmt::format("'{}' {}", c.memory_key, problem));
  }
  if (c.memory_interval > 0 && c.dir.empty())
    r.Error("memory_interval",
            "in-memory copies need ckpt.dir (the durable fallback of --resume auto)");
  r.RejectUnknown();
}

// Cross-table rules: shapes the engine can run.
void CheckCombined(const RunConfig& c, std::vector<std::string>* errors) {
  if (c.train.seq_len > c.model.max_seq_len) {
    errors->push_back(fmt::format("train.seq_len: {} exceeds model.max_seq_len={}", c.train.seq_len,
                                  c.model.max_seq_len));
  }
  if (c.train.global_batch_seqs() % c.run.layout.mbs != 0) {
    errors->push_back(fmt::format("run.layout: mbs={} must divide train.global_batch_seqs={}",
                                  c.run.layout.mbs, c.train.global_batch_seqs()));
  }
  if (c.train.precision == spec::Precision::kFp8) {
    errors->push_back(
        "train.precision: fp8 is not implemented by the CPU engine (use fp32 or bf16)");
  }
  if (c.run.layout.recompute_modules != 0) {
    errors->push_back(fmt::format(
        "run.layout: recompute_modules={} is not implemented by the CPU engine (selective "
        "recomputes core attention; use recompute=selective or full)",
        spec::RecomputeModulesText(c.run.layout.recompute_modules)));
  }
  if (c.total_steps() < 1) errors->push_back("train.total_tokens: gives fewer than one step");
  if (c.optim.warmup_steps >= c.schedule_steps() && c.schedule_steps() > 1) {
    errors->push_back(fmt::format("optim.warmup_steps: {} must be below the {} steps of the run",
                                  c.optim.warmup_steps, c.schedule_steps()));
  }
  if (c.run.lr_steps > 0 && c.run.lr_steps < c.total_steps()) {
    errors->push_back(fmt::format("run.lr_steps: {} must be at least the run's {} steps",
                                  c.run.lr_steps, c.total_steps()));
  }
}

}  // namespace

core::Result<std::string> ApplyOverrides(const std::string& text, const std::string& source,
                                         const std::vector<std::string>& overrides) {
  if (overrides.empty()) return text;
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, source));
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      return core::Status::Error(fmt::format("--set '{}': expected table.key=value", o));
    }
    const std::string path = o.substr(0, eq), value = o.substr(eq + 1);
    toml::table value_table;
    if (auto parsed = spec::ParseTomlText("v = " + value, "--set"); parsed.ok()) {
      value_table = std::move(*parsed);
    } else {
      value_table.insert_or_assign("v", value);  // a bare word is a string
    }
    toml::table* t = &root;
    size_t begin = 0;
    for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', begin)) {
      const std::string part = path.substr(begin, dot - begin);
      if (!t->get(part)) t->insert_or_assign(part, toml::table{});
      t = t->get(part)->as_table();
      if (!t) return core::Status::Error(fmt::format("--set '{}': '{}' is not a table", o, part));
      begin = dot + 1;
    }
    if (path.find('.') == std::string::npos) {
      return core::Status::Error(fmt::format("--set '{}': give table.key (e.g. optim.lr)", o));
    }
    t->insert_or_assign(path.substr(begin), *value_table.get("v"));
  }
  std::ostringstream out;
  out << root;
  return out.str();
}

core::Result<RunConfig> RunConfigFromToml(const std::string& text, const std::string& source,
                                          const std::vector<std::string>& overrides) {
  PM_ASSIGN_OR_RETURN(std::string merged, ApplyOverrides(text, source, overrides));
  RunConfig c;
  PM_ASSIGN_OR_RETURN(c.model, spec::ModelFromTomlText(merged, source));
  PM_ASSIGN_OR_RETURN(c.train, spec::TrainFromTomlText(merged, source));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(merged, source));
  std::vector<std::string> errors;
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if (key != "model" && key != "train" && key != "optim" && key != "data" && key != "run" &&
        key != "ckpt") {
      errors.push_back(
          fmt::format("{}: unknown table (known: model, train, optim, data, run, ckpt)", key));
    }
  }
  ReadOptim(root, c.optim, &errors);
  ReadData(root, c.data, &errors);
  ReadRun(root, c.run, &errors);
  ReadCkpt(root, c.ckpt, &errors);
  if (errors.empty()) CheckCombined(c, &errors);
  PM_RETURN_IF_ERROR(spec::JoinFieldErrors(source, errors));
  c.toml = merged;
  return c;
}

core::Result<RunConfig> LoadRunConfig(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  return RunConfigFromToml(text, path, overrides);
}

void UseHostProfile(RunOptions& o, const HostProfile& h) {
  o.host = h;
  o.peak_gflops = h.peak_gflops;
  o.mem_gbps = h.mem_gbps;
}

}  // namespace pentamesh::train
