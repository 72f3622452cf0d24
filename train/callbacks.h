// Every callback the train package offers, for one include.
#pragma once

#include "train/callback.h"
#include "train/checkpoint.h"
#include "train/early_stop.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/preemption.h"
#include "train/progress.h"
#include "train/step_log.h"
#include "train/weight_averaging.h"
