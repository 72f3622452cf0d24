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
  t.set_scheduler(scheduler_.get());
}

}  // namespace weft::train
