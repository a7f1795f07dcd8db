// SPDX-License-Identifier: BSD-3-Clause
// Placeholder: replaced by the engine implementation.
#include "mroce/engine.hpp"
namespace mroce {
struct Engine::Impl { EngineConfig cfg; EngineStats st; };
Engine::Engine(const EngineConfig& c) : impl_(std::make_unique<Impl>()) { impl_->cfg = c; }
Engine::~Engine() = default;
const EngineConfig& Engine::config() const noexcept { return impl_->cfg; }
const EngineStats& Engine::stats() const noexcept { return impl_->st; }
}
