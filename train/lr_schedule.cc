// LRSchedule (train/lr_schedule.h).
#include "train/lr_schedule.h"

#include "core/error.h"
#include "train/trainer.h"

namespace weft::train {

void LRSchedule::on_prepared(Trainer& t) {
  WEFT_CHECK(static_cast<bool>(factory_), "LRSchedule: no scheduler factory given");
  if (!t.has_optimizer()) return;
  scheduler_ = factory_(t.optimizer());
  WEFT_CHECK(scheduler_ != nullptr, "LRSchedule: the factory returned no scheduler");
  plateau_ = dynamic_cast<optim::ReduceLROnPlateau*>(scheduler_.get());
  WEFT_CHECK(!plateau_ || every_ == Every::kEpoch,
             "LRSchedule: a ReduceLROnPlateau steps once per epoch with the epoch's metric: use Every::kEpoch, ",
             "not Every::kStep");
  t.set_scheduler(scheduler_.get());
}

void LRSchedule::on_epoch_end(Trainer& t) {
  const bool evaluated = evaluated_;
  evaluated_ = false;
  if (!scheduler_ || every_ != Every::kEpoch) return;
  // Note [a period cut short] (train/trainer.h): the period is recorded but not
  // over; its step comes at its real end, when training goes on from here.
  if (t.state().batch != 0) return;
  if (!plateau_) {
    scheduler_->step();
    return;
  }
  const std::string key = !monitor_.empty() ? monitor_ : evaluated ? t.options().valid_name + "_loss" : "train_loss";
  plateau_->step(t.state().history.back().get(key, t.options().metric.name, t.options().valid_name));
}

}  // namespace weft::train
