#include "hooks/registry.h"

#include <functional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hooks/default_hooks.h"
#include "hooks/int8_hook.h"
#include "hooks/powersgd_hook.h"

namespace ddpx {
namespace {

using Options = std::map<std::string, std::string>;
using HookFactory = std::function<absl::StatusOr<std::unique_ptr<CommHook>>(
    std::shared_ptr<ProcessGroup>, const Options&)>;
using WrapperFactory =
    std::function<std::unique_ptr<CommHook>(std::unique_ptr<CommHook>)>;

absl::Status no_options(const std::string& name, const Options& options) {
  if (options.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "hook '", name, "' takes no options, got '", options.begin()->first, "'"));
}

// A factory for a hook without options.
template <typename Make>
HookFactory plain(std::string name, Make make) {
  return [name, make](std::shared_ptr<ProcessGroup> pg,
                      const Options& options) -> absl::StatusOr<std::unique_ptr<CommHook>> {
    if (absl::Status s = no_options(name, options); !s.ok()) return s;
    return std::unique_ptr<CommHook>(make(std::move(pg)));
  };
}

absl::StatusOr<bool> parse_bool(const std::string& hook, const std::string& key,
                                const std::string& value) {
  bool b;
  if (value == "1" || value == "0") return value == "1";
  if (absl::SimpleAtob(value, &b)) return b;
  return absl::InvalidArgumentError(
      absl::StrCat(hook, " hook: option ", key, "='", value, "' is not a boolean (0/1)"));
}

absl::Status unknown_option(const std::string& hook, const std::string& key,
                            const std::string& known) {
  return absl::InvalidArgumentError(
      absl::StrCat(hook, " hook: unknown option '", key, "' (known: ", known, ")"));
}

absl::StatusOr<std::unique_ptr<CommHook>> make_noop(std::shared_ptr<ProcessGroup> pg,
                                                    const Options& options) {
  bool sync = false;
  for (const auto& [key, value] : options) {
    if (key != "sync") return unknown_option("noop", key, "sync");
    absl::StatusOr<bool> b = parse_bool("noop", key, value);
    if (!b.ok()) return b.status();
    sync = *b;
  }
  if (sync) return std::unique_ptr<CommHook>(make_synchronizing_noop_hook(std::move(pg)));
  return std::unique_ptr<CommHook>(make_noop_hook());
}

absl::StatusOr<std::unique_ptr<CommHook>> make_int8(std::shared_ptr<ProcessGroup> pg,
                                                    const Options& options) {
  Int8HookOptions o;
  for (const auto& [key, value] : options) {
    if (key == "hierarchical") {
      absl::StatusOr<bool> b = parse_bool("int8", key, value);
      if (!b.ok()) return b.status();
      o.hierarchical = *b;
    } else if (key == "local_size") {
      if (!absl::SimpleAtoi(value, &o.local_size) || o.local_size < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "int8 hook: option local_size='", value, "' is not a positive integer"));
      }
    } else {
      return unknown_option("int8", key, "hierarchical, local_size");
    }
  }
  if (o.local_size != 0 && !o.hierarchical) {
    return absl::InvalidArgumentError(
        "int8 hook: local_size is only used with hierarchical=1");
  }
  absl::StatusOr<std::unique_ptr<CountingHook>> hook = make_int8_hook(std::move(pg), o);
  if (!hook.ok()) return hook.status();
  return std::unique_ptr<CommHook>(std::move(*hook));
}

const std::map<std::string, HookFactory>& hooks() {
  static const auto* table = new std::map<std::string, HookFactory>{
      {"allreduce", plain("allreduce", make_allreduce_hook)},
      {"fp16", plain("fp16", make_fp16_compress_hook)},
      {"bf16", plain("bf16", make_bf16_compress_hook)},
      {"noop", make_noop},
      {"int8", make_int8},
      {"powersgd",
       [](std::shared_ptr<ProcessGroup> pg, const Options& o) {
         return make_powersgd_hook(std::move(pg), o, /*batched=*/false);
       }},
      {"batched_powersgd",
       [](std::shared_ptr<ProcessGroup> pg, const Options& o) {
         return make_powersgd_hook(std::move(pg), o, /*batched=*/true);
       }},
  };
  return *table;
}

const std::map<std::string, WrapperFactory>& wrappers() {
  static const auto* table = new std::map<std::string, WrapperFactory>{
      {"fp16", [](std::unique_ptr<CommHook> h) -> std::unique_ptr<CommHook> {
         return fp16_compress_wrapper(std::move(h));
       }},
      {"bf16", [](std::unique_ptr<CommHook> h) -> std::unique_ptr<CommHook> {
         return bf16_compress_wrapper(std::move(h));
       }},
  };
  return *table;
}

template <typename Map>
std::string names_of(const Map& map) {
  std::vector<std::string> names;
  for (const auto& entry : map) names.push_back(entry.first);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::vector<HookSpecPart>> parse_hook_spec(const std::string& spec) {
  if (spec.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty hook spec (hooks: ", names_of(hooks()), ")"));
  }
  std::vector<HookSpecPart> parts;
  for (absl::string_view text : absl::StrSplit(spec, '+')) {
    std::pair<absl::string_view, absl::string_view> name_opts =
        absl::StrSplit(text, absl::MaxSplits(':', 1));
    HookSpecPart part;
    part.name = std::string(absl::StripAsciiWhitespace(name_opts.first));
    if (part.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("hook spec '", spec, "' has an empty part"));
    }
    if (!name_opts.second.empty()) {
      for (absl::string_view kv : absl::StrSplit(name_opts.second, ',')) {
        std::pair<absl::string_view, absl::string_view> key_value =
            absl::StrSplit(kv, absl::MaxSplits('=', 1));
        std::string key(absl::StripAsciiWhitespace(key_value.first));
        std::string value(absl::StripAsciiWhitespace(key_value.second));
        if (key.empty() || value.empty() || kv.find('=') == absl::string_view::npos) {
          return absl::InvalidArgumentError(absl::StrCat(
              "hook spec '", spec, "': option '", kv, "' of '", part.name,
              "' is not key=value"));
        }
        if (!part.options.emplace(key, value).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "hook spec '", spec, "': option '", key, "' given twice"));
        }
      }
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

absl::StatusOr<std::unique_ptr<CommHook>> make_comm_hook(
    const std::string& spec, std::shared_ptr<ProcessGroup> pg) {
  if (pg == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("hook '", spec, "': no process group"));
  }
  absl::StatusOr<std::vector<HookSpecPart>> parts = parse_hook_spec(spec);
  if (!parts.ok()) return parts.status();

  const HookSpecPart& base = parts->back();
  auto factory = hooks().find(base.name);
  if (factory == hooks().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown hook '", base.name, "' in '", spec, "' (hooks: ", names_of(hooks()),
        "; wrappers before a '+': ", names_of(wrappers()), ")"));
  }
  absl::StatusOr<std::unique_ptr<CommHook>> hook = factory->second(pg, base.options);
  if (!hook.ok()) return hook.status();

  std::unique_ptr<CommHook> result = std::move(*hook);
  for (auto it = parts->rbegin() + 1; it != parts->rend(); ++it) {
    auto wrapper = wrappers().find(it->name);
    if (wrapper == wrappers().end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", it->name, "' in '", spec, "' is not a wrapper (wrappers: ",
          names_of(wrappers()), "; the hook comes last)"));
    }
    if (absl::Status s = no_options(it->name, it->options); !s.ok()) return s;
    result = wrapper->second(std::move(result));
  }
  return result;
}

std::vector<std::string> comm_hook_names() {
  std::vector<std::string> names;
  for (const auto& entry : hooks()) names.push_back(entry.first);
  return names;
}

std::vector<std::string> comm_hook_wrapper_names() {
  std::vector<std::string> names;
  for (const auto& entry : wrappers()) names.push_back(entry.first);
  return names;
}

}  // namespace ddpx
